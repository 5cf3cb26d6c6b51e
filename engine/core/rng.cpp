#include "engine/core/rng.hpp"

#include <cmath>

namespace tandem {

float Rng::normal() {
  // 1 - uniform() is in (0, 1], so the log is finite.
  const float u1 = 1.0f - uniform(), u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530717958647692f * u2);
}

}  // namespace tandem
