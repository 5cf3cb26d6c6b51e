#pragma once
// Which device a rank computes on. `device` (or this rank's entry of `devices`) says
// cpu, cuda or auto; auto takes a GPU where the CUDA runtime sees one and the CPU
// otherwise, saying why. A GPU rank takes GPU (local rank mod GPUs on its host): one
// GPU per rank where there are enough, several ranks sharing one where there are not
// (gradients then go through MPI, see engine/dist/nccl_comm.hpp).
#include <memory>
#include <string>

#include "engine/core/device.hpp"
#include "engine/train/config.hpp"

namespace tandem {

struct DeviceChoice {
  Device* device = nullptr;            // cpu_device() or owned
  std::unique_ptr<Device> owned;       // the rank's CUDA device
  std::string kind;                    // what the config asked for this rank
  std::string note;                    // why auto chose the CPU, for the log
};

DeviceChoice choose_device(const DeviceConfig& cfg, int rank);
// This rank's index among the ranks on its host (from the MPI launcher's
// environment; the world rank where none is set).
int local_rank(int rank);

}  // namespace tandem
