#include "engine/nn/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "engine/core/error.hpp"

namespace tandem {

LrSchedule::LrSchedule(const ScheduleConfig& cfg, double base_lr, int64_t iterations_per_epoch,
                       int64_t total_iterations)
    : cfg_(cfg), base_lr_(base_lr), per_epoch_(std::max<int64_t>(iterations_per_epoch, 1)),
      total_(std::max<int64_t>(total_iterations, 1)) {
  TANDEM_CHECK_HINT(cfg.kind == "constant" || cfg.kind == "step" || cfg.kind == "cosine",
                    "use schedule.kind = constant, step or cosine", "unknown schedule '", cfg.kind, "'");
}

double LrSchedule::at(int64_t t) const { return at_position(static_cast<double>(t)); }

double LrSchedule::at_position(double t) const {
  const double warmup = static_cast<double>(cfg_.warmup_iterations);
  if (cfg_.warmup_iterations > 0 && t < warmup) return base_lr_ * (t + 1.0) / warmup;
  if (cfg_.kind == "step") {
    const double epochs = t / static_cast<double>(per_epoch_);
    return base_lr_ * std::pow(cfg_.gamma, std::floor(epochs / cfg_.step_epochs));
  }
  if (cfg_.kind == "cosine") {
    const int64_t span = std::max<int64_t>(total_ - cfg_.warmup_iterations, 1);
    const double progress = std::clamp((t - warmup) / static_cast<double>(span), 0.0, 1.0);
    return cfg_.min_lr + (base_lr_ - cfg_.min_lr) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
  }
  return base_lr_;
}

double lr_batch_scale(const std::string& rule, int64_t batch, int64_t base_batch, double phi) {
  if (batch == base_batch || batch <= 0 || base_batch <= 0) return 1.0;
  const double ratio = static_cast<double>(batch) / static_cast<double>(base_batch);
  if (rule == "sqrt") return std::sqrt(ratio);
  if (rule == "adascale") {
    if (!(phi > 0.0)) return 1.0;
    return (phi / static_cast<double>(base_batch) + 1.0) / (phi / static_cast<double>(batch) + 1.0);
  }
  TANDEM_CHECK_HINT(rule == "linear", "use lr_scaling = linear, sqrt or adascale", "unknown lr_scaling '", rule, "'");
  return ratio;
}

}  // namespace tandem
