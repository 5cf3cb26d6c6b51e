// The first gpu-labelled test: the CUDA runtime sees a device and a buffer survives
// a round trip through it. Where there is no GPU (or no CUDA), it exits 77, which
// ctest reports as skipped (SKIP_RETURN_CODE), never as passed. The CUDA backend's
// per-op tests (each kernel against its CPU reference) join this label.
#include <cstdio>
#include <vector>

#include "engine/core/gpu_probe.hpp"

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int main() {
  const tandem::GpuProbe gpus = tandem::probe_gpus();
  if (gpus.devices.empty()) {
    std::printf("skipped: no GPU (%s)\n", gpus.reason.c_str());
    return 77;
  }
  for (const auto& d : gpus.devices) std::printf("gpu: %s\n", d.c_str());
#if TANDEM_HAVE_CUDA
  std::vector<float> host(1 << 20), back(host.size());
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  void* dev = nullptr;
  const size_t bytes = host.size() * sizeof(float);
  if (cudaMalloc(&dev, bytes) != cudaSuccess || cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(back.data(), dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("FAIL: CUDA round trip: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaFree(dev);
  if (back != host) {
    std::printf("FAIL: the buffer came back changed\n");
    return 1;
  }
  std::printf("ok: %zu bytes through device 0 and back\n", bytes);
  return 0;
#else
  return 77;
#endif
}
