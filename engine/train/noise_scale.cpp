#include "engine/train/noise_scale.hpp"

#include <algorithm>
#include <cmath>

namespace tandem {

void NoiseScale::observe(const std::vector<WorkerStats>& workers, double global_grad_sq) {
  if (!(global_grad_sq >= 0.0) || !std::isfinite(global_grad_sq)) return;
  int64_t big = 0, with_samples = 0;
  double weighted = 0.0;
  for (const WorkerStats& w : workers) {
    if (w.local_batch <= 0) continue;
    if (!(w.grad_sq > 0.0) || !std::isfinite(w.grad_sq)) return;  // not measured
    big += w.local_batch;
    ++with_samples;
    weighted += static_cast<double>(w.local_batch) * w.grad_sq;
  }
  if (with_samples < 2) return;
  const double b_big = static_cast<double>(big), b_small = b_big / static_cast<double>(with_samples);
  const double small_sq = weighted / b_big;
  const double g2 = (b_big * global_grad_sq - b_small * small_sq) / (b_big - b_small);
  const double trace = (small_sq - global_grad_sq) / (1.0 / b_small - 1.0 / b_big);
  const double keep = seen_ == 0 ? 0.0 : smoothing_;
  g2_ = keep * g2_ + (1.0 - keep) * g2;
  trace_ = keep * trace_ + (1.0 - keep) * trace;
  ++seen_;
  // A non-positive |G|^2 means the noise dominates: the upper end.
  phi_ = g2_ > 0.0 ? std::clamp(trace_ / g2_, 1e-6 * b_big, 1e6 * b_big) : 1e6 * b_big;
}

void NoiseScale::restore(const std::vector<double>& s) {
  if (s.size() != 4 || !std::all_of(s.begin(), s.end(), [](double v) { return std::isfinite(v); })) return;
  g2_ = s[0];
  trace_ = s[1];
  seen_ = static_cast<int64_t>(s[2]);
  phi_ = s[3];
}

}  // namespace tandem
