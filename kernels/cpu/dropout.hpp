#pragma once
// Inverted dropout with a counter-based mask (no RNG state): whether element (row,
// col) survives is a hash of (seed, global row, col). The same sample gets the same
// mask whichever worker processes it, and backward recomputes the mask instead of
// storing it.
#include <cstdint>

namespace tandem::cpu {

// Uniform in [0, 1) from a 64-bit key (splitmix64 finalizer).
inline float hash_uniform(uint64_t key) {
  key += 0x9e3779b97f4a7c15ULL;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
  key ^= key >> 31;
  return static_cast<float>(key >> 40) * (1.0f / 16777216.0f);
}

void dropout_forward(const float* x, float* y, int rows, int cols, float p, uint64_t seed, int64_t first_row);
void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, uint64_t seed, int64_t first_row);

}  // namespace tandem::cpu
