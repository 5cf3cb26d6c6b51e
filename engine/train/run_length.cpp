#include "engine/train/run_length.hpp"

#include <algorithm>
#include <cmath>

namespace tandem {

RunLength run_length(const ExperimentConfig& cfg, int64_t per_epoch) {
  RunLength r;
  r.epoch_iterations = static_cast<int64_t>(std::ceil(cfg.stop.epochs * static_cast<double>(per_epoch)));
  r.epoch_samples = r.epoch_iterations * cfg.global_batch;
  r.max_iterations = cfg.adaptive_batch()
                         ? static_cast<int64_t>(std::ceil(static_cast<double>(r.epoch_samples) /
                                                          static_cast<double>(cfg.global_batch_min())))
                         : r.epoch_iterations;
  if (cfg.stop.max_iterations) r.max_iterations = std::min(r.max_iterations, *cfg.stop.max_iterations);
  r.schedule_iterations = cfg.adaptive_batch() ? r.epoch_iterations : r.max_iterations;
  return r;
}

}  // namespace tandem
