#include "kernels/cpu/bf16_wire.hpp"

#include <cstring>

#include "kernels/cpu/round_mantissa.hpp"

namespace tandem::cpu {

namespace {
inline uint16_t one_to_bf16(float x) {
  uint32_t u;
  const float r = round_mantissa(x, 7);
  std::memcpy(&u, &r, sizeof u);
  // A NaN whose payload lies in the low bits alone would read as infinity: keep it a
  // (quiet) NaN of the same sign.
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>(u >> 16);
}
inline float one_from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
}  // namespace

void to_bf16(const float* x, size_t count, uint16_t* out) {
  for (size_t i = 0; i < count; ++i) out[i] = one_to_bf16(x[i]);
}

void from_bf16(const uint16_t* x, size_t count, float* out) {
  for (size_t i = 0; i < count; ++i) out[i] = one_from_bf16(x[i]);
}

void add_bf16(const uint16_t* x, size_t count, float* acc) {
  for (size_t i = 0; i < count; ++i) acc[i] += one_from_bf16(x[i]);
}

}  // namespace tandem::cpu
