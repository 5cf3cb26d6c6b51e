#include "engine/nn/layer.hpp"

#include <vector>

namespace tandem {

void init_uniform(Device& dev, float* p, size_t n, float bound, Rng& rng) {
  std::vector<float> host(n);
  for (auto& v : host) v = rng.uniform(-bound, bound);
  dev.copy_from_host(p, host.data(), n);
}

void init_normal(Device& dev, float* p, size_t n, float stddev, Rng& rng) {
  std::vector<float> host(n);
  for (auto& v : host) v = stddev * rng.normal();
  dev.copy_from_host(p, host.data(), n);
}

}  // namespace tandem
