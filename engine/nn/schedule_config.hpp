#pragma once
// The learning-rate schedule's settings, owned by nn beside LrSchedule so that the
// schedule needs nothing from training; engine/train/config.hpp holds one inside
// ExperimentConfig, and scripts/tandem/experiment.lua documents each key.
#include <cstdint>
#include <string>

namespace tandem {

struct ScheduleConfig {
  std::string kind = "constant";  // constant | step | cosine
  int64_t warmup_iterations = 0;  // linear ramp from 0 to lr
  double step_epochs = 1.0;       // step: multiply by gamma every step_epochs epochs
  double gamma = 0.1;
  double min_lr = 0.0;  // cosine: the floor reached at the last iteration
};

}  // namespace tandem
