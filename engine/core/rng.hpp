#pragma once
// A small deterministic generator (splitmix64). Parameter initialisation and the
// global sampler must give the same numbers on every rank, every platform and every
// standard library, which std::uniform_*_distribution does not promise.
#include <cstdint>

#include "kernels/dropout_seed.hpp"

namespace tandem {

class Rng {
public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits, exactly representable as float.
  float uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) without modulo bias (Lemire's method).
  uint64_t below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next_u64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Standard normal (Box-Muller), for synthetic data.
  float normal();

private:
  uint64_t state_;
};

// Mixes several values into one seed (seed, epoch, iteration, ...).
// (Rng(a ^ (b * golden + constant)).next_u64(), shared with the kernels.)
inline uint64_t mix_seed(uint64_t a, uint64_t b) { return seed_mix(a, b); }

}  // namespace tandem
