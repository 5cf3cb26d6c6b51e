#include "kernels/cpu/round_mantissa.hpp"

#include <cstdint>
#include <cstring>

namespace tandem::cpu {

namespace {
inline float round_bits(float x, int drop, uint32_t half_minus_one, uint32_t keep_mask) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u) return x;  // NaN or infinity
  // Adding half an ulp (less one when the kept part is even) and truncating rounds to
  // nearest with ties to even; a carry out of the mantissa moves the exponent up,
  // which is the correct rounding too, infinity included.
  u += half_minus_one + ((u >> drop) & 1u);
  u &= keep_mask;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
}  // namespace

float round_mantissa(float x, int bits) {
  if (bits >= 23) return x;
  const int drop = 23 - bits;
  return round_bits(x, drop, (1u << (drop - 1)) - 1u, ~((1u << drop) - 1u));
}

void round_matrix(const float* src, int rows, int cols, int ld, int bits, float* dst) {
  if (bits >= 23) {
    for (int r = 0; r < rows; ++r) std::memcpy(dst + static_cast<size_t>(r) * cols, src + static_cast<size_t>(r) * ld,
                                               static_cast<size_t>(cols) * sizeof(float));
    return;
  }
  const int drop = 23 - bits;
  const uint32_t half = (1u << (drop - 1)) - 1u, mask = ~((1u << drop) - 1u);
  for (int r = 0; r < rows; ++r) {
    const float* s = src + static_cast<size_t>(r) * ld;
    float* d = dst + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) d[c] = round_bits(s[c], drop, half, mask);
  }
}

}  // namespace tandem::cpu
