#include "engine/core/gpu_probe.hpp"

#include <cstdio>

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem {

GpuProbe probe_gpus() {
  GpuProbe p;
#if TANDEM_HAVE_CUDA
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    p.reason = std::string("the CUDA runtime reports: ") + cudaGetErrorString(err);
    return p;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    char text[512];
    std::snprintf(text, sizeof text, "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    p.devices.push_back(text);
    p.memory_bytes.push_back(static_cast<double>(prop.totalGlobalMem));
  }
  if (p.devices.empty()) p.reason = "the CUDA runtime sees no device";
#else
  p.reason = "tandem was built without CUDA";
#endif
  return p;
}

}  // namespace tandem
