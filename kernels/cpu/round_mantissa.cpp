#include "kernels/cpu/round_mantissa.hpp"

#include <cstdint>
#include <cstring>

namespace tandem::cpu {

namespace {
// Rounding to `bits` mantissa bits (bits < 23): the low `drop` bits go.
struct Rounding {
  explicit Rounding(int bits) : drop(23 - bits), half_minus_one((1u << (drop - 1)) - 1u), keep(~((1u << drop) - 1u)) {}
  float operator()(float x) const {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u) return x;  // NaN or infinity
    // Adding half an ulp (less one when the kept part is even) and truncating rounds
    // to nearest with ties to even; a carry out of the mantissa moves the exponent
    // up, which is the correct rounding too, infinity included.
    u += half_minus_one + ((u >> drop) & 1u);
    u &= keep;
    std::memcpy(&x, &u, sizeof x);
    return x;
  }
  int drop;
  uint32_t half_minus_one, keep;
};
}  // namespace

float round_mantissa(float x, int bits) { return bits >= 23 ? x : Rounding(bits)(x); }

void round_matrix(const float* src, int rows, int cols, int ld, int bits, float* dst) {
  if (bits >= 23) {
    for (int r = 0; r < rows; ++r) std::memcpy(dst + static_cast<size_t>(r) * cols, src + static_cast<size_t>(r) * ld,
                                               static_cast<size_t>(cols) * sizeof(float));
    return;
  }
  const Rounding round(bits);
  for (int r = 0; r < rows; ++r) {
    const float* s = src + static_cast<size_t>(r) * ld;
    float* d = dst + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) d[c] = round(s[c]);
  }
}

void round_in_place(float* x, size_t count, int bits) {
  if (bits >= 23) return;
  const Rounding round(bits);
  for (size_t i = 0; i < count; ++i) x[i] = round(x[i]);
}

}  // namespace tandem::cpu
