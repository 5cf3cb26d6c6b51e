#pragma once
// How long a run is, as the trainer and `tandem sim` both count it (one place, so
// the two stop alike): stop.epochs in global batches of B0 (what a schedule spans),
// in samples (where a run with B adaptive ends: epochs count samples once B may
// change), and the iterations it runs at most (stop.max_iterations caps them; with
// B adaptive they are counted at policy.global_batch.min).
#include <cstdint>

#include "engine/train/config.hpp"

namespace tandem {

struct RunLength {
  int64_t epoch_iterations = 0;  // ceil(stop.epochs * per_epoch): global batches of B0
  int64_t epoch_samples = 0;     // epoch_iterations * B0
  int64_t max_iterations = 0;    // the loop's bound
  // The iterations a learning-rate schedule spans: with B fixed the run's own (as
  // before adaptive batches), with B adaptive the epochs' in batches of B0.
  int64_t schedule_iterations = 0;
};

// per_epoch: global batches of B0 in an epoch (GlobalSampler::iterations_per_epoch).
RunLength run_length(const ExperimentConfig& cfg, int64_t per_epoch);

}  // namespace tandem
