#include "engine/core/gpu_probe.hpp"

#include <cstdio>

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#endif

namespace tandem {

#if TANDEM_HAVE_CUDA
namespace {

// NVML, opened at run time: libnvidia-ml.so.1 ships with the driver, not the toolkit,
// so a build that linked it would not start on a machine without a driver (these
// development machines). The four calls and the one struct are NVML's stable ABI.
class Nvml {
public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    init_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"));
    by_bus_ = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    memory_ = reinterpret_cast<int (*)(void*, Memory*)>(dlsym(lib_, "nvmlDeviceGetMemoryInfo"));
    ready_ = init_ && shutdown_ && by_bus_ && memory_ && init_() == 0;
  }
  ~Nvml() {
    if (ready_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  // The free bytes of the device at this PCI address ("0000:3b:00.0"); 0 if unknown.
  double free_bytes(const char* bus_id) const {
    void* device = nullptr;
    Memory m{};
    if (!ready_ || by_bus_(bus_id, &device) != 0 || memory_(device, &m) != 0) return 0.0;
    return static_cast<double>(m.free);
  }

private:
  struct Memory {
    unsigned long long total, free, used;
  };
  void* lib_ = nullptr;
  bool ready_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*by_bus_)(const char*, void**) = nullptr;
  int (*memory_)(void*, Memory*) = nullptr;
};

}  // namespace
#endif

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
    // CUDA numbers devices its own way (fastest first, CUDA_VISIBLE_DEVICES): NVML is
    // asked by the device's PCI address instead of its number.
    static const Nvml nvml;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%08x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    p.free_bytes.push_back(nvml.free_bytes(bus));
  }
  if (p.devices.empty()) p.reason = "the CUDA runtime sees no device";
#else
  p.reason = "tandem was built without CUDA";
#endif
  return p;
}

}  // namespace tandem
