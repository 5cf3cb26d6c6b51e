#pragma once
// Where a dropout mask's seed comes from. A mask is keyed by a per-layer seed mixed
// from the iteration's seed (and, in a transformer block, the site of the dropout);
// the kernels take the parts, so the iteration's seed may be a value from the host
// or lie in device memory, where a captured step reads the next step's seed
// (engine/train/step.hpp: the fused step writes it with its scalars, as two doubles
// holding its high and low 32 bits: kernels/step_rule.hpp's kStepSeedHigh, Low).
#include <cstdint>

#include "kernels/host_device.hpp"

namespace tandem {

// splitmix64 of a ^ (b * golden + constant): engine/core/rng.hpp's mix_seed (which
// calls this), here for kernels too.
TANDEM_HOST_DEVICE inline uint64_t seed_mix(uint64_t a, uint64_t b) {
  uint64_t z = (a ^ (b * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL)) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct DropoutSeed {
  uint64_t iteration = 0;                // the iteration's seed, unless ...
  const double* on_device = nullptr;     // ... it lies here: 2 doubles, its high and low 32 bits
  uint64_t salt = 0;                     // the layer's
  uint64_t site = 0;                     // the place in the layer, when `sited`
  bool sited = false;
};

// The iteration's seed as two doubles, its high and low 32 bits (each exact in a
// double), as the step writes it to device memory ...
TANDEM_HOST_DEVICE inline void seed_to_halves(uint64_t seed, double* halves) {
  halves[0] = static_cast<double>(seed >> 32);
  halves[1] = static_cast<double>(seed & 0xffffffffULL);
}

// ... and back from its two halves.
TANDEM_HOST_DEVICE inline uint64_t seed_of_halves(const double* halves) {
  return (static_cast<uint64_t>(halves[0]) << 32) | static_cast<uint64_t>(halves[1]);
}

// The mask's key from the iteration's seed.
TANDEM_HOST_DEVICE inline uint64_t dropout_key(uint64_t iteration, const DropoutSeed& s) {
  const uint64_t k = seed_mix(iteration, s.salt);
  return s.sited ? seed_mix(k, s.site) : k;
}

}  // namespace tandem
