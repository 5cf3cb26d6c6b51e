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

// Largest |analytic - numeric| relative to max(1, largest |gradient|).
inline double max_scaled_error(const std::vector<float>& analytic, const std::vector<double>& numeric) {
  double scale = 1e-3, err = 0.0;
  for (size_t i = 0; i < analytic.size(); ++i) scale = std::max({scale, std::abs(numeric[i]), double(std::abs(analytic[i]))});
  for (size_t i = 0; i < analytic.size(); ++i) err = std::max(err, std::abs(analytic[i] - numeric[i]));
  return err / scale;
}

// Numeric derivative of f() w.r.t. each of values[0..n), perturbing in place.
inline std::vector<double> numeric_gradient(float* values, size_t n, const std::function<double()>& f,
                                            float eps = 1e-2f) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) {
    const float keep = values[i];
    values[i] = keep + eps;
    const double up = f();
    values[i] = keep - eps;
    const double down = f();
    values[i] = keep;
    g[i] = (up - down) / (2.0 * eps);
  }
  return g;
}

}  // namespace tandem::testing
