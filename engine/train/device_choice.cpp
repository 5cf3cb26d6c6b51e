#include "engine/train/device_choice.hpp"

#include <cstdlib>

#include "engine/core/cuda_device.hpp"
#include "engine/core/error.hpp"
#include "engine/core/gpu_probe.hpp"

namespace tandem {

int local_rank(int rank) {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return rank;
}

DeviceChoice choose_device(const DeviceConfig& cfg, int rank) {
  DeviceChoice c;
  c.kind = cfg.kind;
  if (!cfg.per_worker.empty()) {
    TANDEM_CHECK_HINT(rank < static_cast<int>(cfg.per_worker.size()), "give one entry of devices per worker",
                      "devices lists ", cfg.per_worker.size(), " devices, none for rank ", rank);
    c.kind = cfg.per_worker[static_cast<size_t>(rank)];
  }
  const Precision precision = parse_precision(cfg.precision);
  if (c.kind == "cpu") {
    c.device = &cpu_device(precision);
    return c;
  }
  TANDEM_CHECK_HINT(c.kind == "cuda" || c.kind == "auto", "use device = 'cpu', 'cuda' or 'auto'", "unknown device '",
                    c.kind, "' for rank ", rank);
  const GpuProbe gpus = probe_gpus();
  if (gpus.devices.empty()) {
    if (c.kind == "auto") {
      c.note = "no GPU (" + gpus.reason + ")";
      c.device = &cpu_device(precision);
      return c;
    }
    TANDEM_FAIL_HINT("set device='cpu' or device='auto', or run where a GPU is present",
                     "rank ", rank, " was asked to compute on a GPU, but ", gpus.reason);
  }
  CudaOptions o;
  o.ordinal = local_rank(rank) % static_cast<int>(gpus.devices.size());
  o.precision = precision;
  c.owned = make_cuda_device(o);
  c.device = c.owned.get();
  return c;
}

}  // namespace tandem
