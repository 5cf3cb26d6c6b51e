#include "engine/sim/noise.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/rng.hpp"

namespace tandem {

double noise_factor(const SimConfig& c, uint64_t seed, int worker, int64_t iteration) {
  if (c.noise <= 0.0) return 1.0;
  Rng rng(mix_seed(mix_seed(seed, static_cast<uint64_t>(worker)), static_cast<uint64_t>(iteration)));
  const double s = c.noise;
  const std::string& d = c.noise_distribution;
  if (d == "normal") return std::max(0.05, 1.0 + s * rng.normal());
  if (d == "uniform") return std::max(0.05, 1.0 + s * std::sqrt(3.0) * (2.0 * rng.uniform() - 1.0));
  if (d == "spikes") {
    // 1 - u in (0, 1]: the log is finite.
    const double excess = -s * std::log(1.0 - static_cast<double>(rng.uniform()));
    return std::max(0.05, 1.0 - s) + excess;
  }
  return std::exp(s * rng.normal() - 0.5 * s * s);
}

}  // namespace tandem
