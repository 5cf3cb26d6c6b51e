#pragma once
// Finite-difference gradient checking for layers and losses (torch/nn's
// jacobian tests, ggml's test-backend-ops): the scalar probe is L = sum(y * r) for a
// fixed random r, so dL/dy = r and one backward gives every analytic derivative.
// Central differences in double around float parameters; the tolerance scales with
// the magnitude of the gradients compared.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "engine/core/rng.hpp"
#include "engine/core/tensor.hpp"

namespace tandem::testing {

// The shape of n samples of per-sample shape s.
inline Shape batched(int64_t n, const Shape& s) {
  Shape out{n};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

inline std::vector<float> random_vector(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(-scale, scale);
  return v;
}

inline double dot(const float* a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < b.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// A numeric gradient, with the elements where the probe is not smooth within +-eps
// (a ReLU or max-pool kink was crossed) marked: a central difference means nothing
// there, so those elements are left out of the comparison. The caller bounds how
// many may be left out, so a broken gradient cannot hide behind the mask.
struct NumericGradient {
  std::vector<double> value;
  std::vector<bool> smooth;
  size_t kinks() const { return static_cast<size_t>(std::count(smooth.begin(), smooth.end(), false)); }
};

// Largest |analytic - numeric| over the smooth elements, relative to the largest
// gradient magnitude (at least 1e-3).
inline double max_scaled_error(const std::vector<float>& analytic, const NumericGradient& numeric) {
  double scale = 1e-3, err = 0.0;
  for (size_t i = 0; i < analytic.size(); ++i)
    scale = std::max({scale, std::abs(numeric.value[i]), double(std::abs(analytic[i]))});
  for (size_t i = 0; i < analytic.size(); ++i)
    if (numeric.smooth[i]) err = std::max(err, std::abs(analytic[i] - numeric.value[i]));
  return err / scale;
}

// Numeric derivative of f() w.r.t. each of values[0..n), perturbing in place.
inline NumericGradient numeric_gradient(float* values, size_t n, const std::function<double()>& f,
                                        float eps = 1e-2f) {
  NumericGradient g{std::vector<double>(n), std::vector<bool>(n, true)};
  const double base = f();
  double scale = 1e-3;
  std::vector<double> ups(n), downs(n);
  for (size_t i = 0; i < n; ++i) {
    const float keep = values[i];
    values[i] = keep + eps;
    ups[i] = (f() - base) / eps;
    values[i] = keep - eps;
    downs[i] = (base - f()) / eps;
    values[i] = keep;
    g.value[i] = 0.5 * (ups[i] + downs[i]);
    scale = std::max(scale, std::abs(g.value[i]));
  }
  // One-sided slopes that disagree by more than curvature could explain mean a kink.
  for (size_t i = 0; i < n; ++i) g.smooth[i] = std::abs(ups[i] - downs[i]) < 0.05 * scale;
  return g;
}

}  // namespace tandem::testing
