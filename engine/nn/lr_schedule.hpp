#pragma once
// Learning rate as a function of the iteration: optional linear warm-up, then
// constant, step decay (x gamma every step_epochs epochs) or cosine annealing to
// min_lr at the last iteration of the run.
#include <cstdint>

#include "engine/nn/schedule_config.hpp"

namespace tandem {

class LrSchedule {
public:
  LrSchedule(const ScheduleConfig& cfg, double base_lr, int64_t iterations_per_epoch, int64_t total_iterations);
  double at(int64_t iteration) const;

private:
  ScheduleConfig cfg_;
  double base_lr_;
  int64_t per_epoch_, total_;
};

}  // namespace tandem
