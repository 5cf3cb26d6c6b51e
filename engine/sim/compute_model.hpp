#pragma once
// The simulator's compute: a worker's step takes what the emulator would stretch
// this machine's calibrated compute to (the same speeds, measured profiles,
// scheduled and random slowdowns and speed trace as a real emulated run, so a
// policy sees the same numbers), times a mean-1 noise factor (noise.hpp: sim.noise,
// sim.noise_distribution); the host's part of the step comes from the calibration.
#include <cstdint>

#include "engine/train/config.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

class ComputeModel {
public:
  // Keeps references: the emulator, machine and config outlive the model.
  ComputeModel(const SimConfig& sim, const Emulator& emulator, const DeviceProfile& machine);

  // Worker r's step at iteration t on local_batch samples: sets w's real_compute_ms,
  // compute_ms, data_ms and speed, nothing else.
  // micro: the micro-batches it is computed in (each pays a pass's fixed cost).
  void step(int r, int64_t t, int64_t local_batch, WorkerStats& w, int64_t micro = 1) const;
  // The ideal throughput: every worker alone at an equal share of the global batch
  // (noise left out), its samples/s summed.
  double ideal_samples_per_s(int workers, int64_t global_batch) const;

private:
  const SimConfig& sim_;
  const Emulator& emulator_;
  const DeviceProfile& machine_;
};

}  // namespace tandem
