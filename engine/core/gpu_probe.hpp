#pragma once
// What GPUs this process can use, asked of the CUDA runtime at run time. A build
// with CUDA can land on a machine without a GPU, or with a driver too old for the
// toolkit (these development machines: "CUDA driver version is insufficient"):
// then the answer is no devices and the runtime's reason, and tandem runs on the
// CPU. A build without CUDA always answers no devices.
#include <string>
#include <vector>

namespace tandem {

struct GpuProbe {
  std::vector<std::string> devices;  // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
  std::vector<double> memory_bytes;  // each device's total memory
  // Each device's free memory now, as the driver's management library (NVML) reads
  // it without opening a CUDA context on the device (which would itself take memory
  // on every GPU); 0 where it cannot be read (no NVML: the total is all one knows).
  std::vector<double> free_bytes;
  std::string reason;                // why there are none, when there are none
};

GpuProbe probe_gpus();

}  // namespace tandem
