#pragma once
// The gradient noise scale phi = tr(Sigma) / |G|^2 (McCandlish et al. 2018, "An
// Empirical Model of Large-Batch Training", appendix A), measured in training from
// two batch sizes, as the star and goodput policies measure it
// (scripts/tandem/noise_scale.lua): the workers' gradients (B_small = B / n over
// the n workers with samples; their batch-weighted mean of |g_r / b_r|^2 has the
// expected value |G|^2 + tr(Sigma) / B_small) and the all-reduced one (B_big = B):
//   |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
//   tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)
// each smoothed by an EWMA, phi the ratio of the smoothed values, clamped to
// [1e-6 B, 1e6 B]. Rank 0 keeps it; AdaScale's learning-rate gain (lr_scaling =
// 'adascale', engine/nn/lr_schedule.hpp lr_batch_scale) follows it.
#include <cstdint>
#include <vector>

#include "engine/train/worker_stats.hpp"

namespace tandem {

class NoiseScale {
public:
  explicit NoiseScale(double smoothing = 0.9) : smoothing_(smoothing) {}
  // One bsp iteration's stats (by rank) and the all-reduced gradient's |G / B|^2;
  // skipped when either is not measured or fewer than 2 workers had samples.
  void observe(const std::vector<WorkerStats>& workers, double global_grad_sq);
  bool known() const { return seen_ > 0; }
  double phi() const { return phi_; }  // 0 before any estimate
  // The state, for checkpoints: {|G|^2 EWMA, tr(Sigma) EWMA, observations, phi}.
  std::vector<double> state() const { return {g2_, trace_, static_cast<double>(seen_), phi_}; }
  void restore(const std::vector<double>& s);

private:
  double smoothing_, g2_ = 0.0, trace_ = 0.0, phi_ = 0.0;
  int64_t seen_ = 0;
};

}  // namespace tandem
