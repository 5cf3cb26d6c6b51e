#pragma once
// Learning rate as a function of the iteration: optional linear warm-up, then
// constant, step decay (x gamma every step_epochs epochs) or cosine annealing to
// min_lr at the last iteration of the run.
#include <cstdint>
#include <string>

#include "engine/nn/schedule_config.hpp"

namespace tandem {

class LrSchedule {
public:
  LrSchedule(const ScheduleConfig& cfg, double base_lr, int64_t iterations_per_epoch, int64_t total_iterations);
  double at(int64_t iteration) const;
  // At a position counted in global batches of the experiment's B0 (samples drawn
  // / B0): with B fixed, the iteration itself, so at_position(t) == at(t).
  double at_position(double position) const;

private:
  ScheduleConfig cfg_;
  double base_lr_;
  int64_t per_epoch_, total_;
};

// The learning rate's factor at global batch `batch` for an lr given at `base_batch`
// (lr_scaling, config.hpp LrScaling): "linear" B / B0, "sqrt" sqrt(B / B0),
// "adascale" AdaScale's gain from the noise scale phi (noise_scale.hpp; 1 while phi
// is not known). 1 at B = B0 in every case.
double lr_batch_scale(const std::string& rule, int64_t batch, int64_t base_batch, double phi);

}  // namespace tandem
