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
  std::string reason;                // why there are none, when there are none
};

GpuProbe probe_gpus();

}  // namespace tandem
