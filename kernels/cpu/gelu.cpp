// GELU, tanh approximation, written so that GCC vectorizes both loops at -O3 on the
// portable x86-64 baseline (SSE2, no -march, no -ffast-math). std::tanh is an opaque
// libm call that no baseline build vectorizes, and it was most of the GPT's GELU time.
//
// Both go through t = 1 - tanh|u| = 2 / (e^{2|u|} + 1), with e^a from a
// range-reduced polynomial (Cephes expf: a = k ln2 + r, |r| <= ln2/2, 2^k put into
// the exponent bits). From t, without the cancellation of 1 - tanh^2 near +-1:
//   1 + tanh u   = u < 0 ? t : 2 - t
//   1 - tanh^2 u = t (2 - t)
// so the tails stay accurate where std::tanh's float result has already rounded to
// +-1. For u > 0 the large part (x in y, 1 in dy/dx) is added last, once, to terms
// that are small beside it: in the obvious order the roundings put y and dx up to
// 2.4e-7 (two ulps) from the std::tanh version near |x| = 1; this way within
// 1.3e-7 * max(1, |x|) over every float in [-20, 20].
// |u| is clamped at 20 (t < 1e-17 there) to keep e^{2|u|} finite; NaN passes
// through, and +-inf give GELU's limits: y(inf) = inf, y(-inf) = 0, dy/dx(inf) = 1,
// dy/dx(-inf) = 0 (std::tanh's version gave NaN but for y(inf)).
#include "kernels/cpu/gelu.hpp"

#include <cstdint>
#include <cstring>

namespace tandem::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// Past |x| = 10, |u| > 43 and t < e^-87: the results are the limits in float.
constexpr float kTail = 10.0f;

// e^a for a in [0, 40]: round-to-nearest k by the 1.5 * 2^23 shift (SSE2 has no
// vector round), Cody-Waite ln2 in two parts, Cephes' degree-7 polynomial (~1 ulp).
inline float exp_nonneg(float a) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  const float k = (a * kLog2e + kShift) - kShift;
  const float r = (a - k * kLn2Hi) - k * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return er * scale;
}

// c ? a : b on the bits, both sides already computed. GCC keeps a ?: on floats as a
// branch under -ftrapping-math (the default: it may not speculate the arms'
// arithmetic), and a branch stops the vectorizer; masks vectorize to and/andnot/or.
inline float select(bool c, float a, float b) {
  uint32_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  const uint32_t r = (ia & mask) | (ib & ~mask);
  float out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

// e^{2|u|}, 2|u| clamped at 40.
inline float exp_2abs(float u) {
  const float a2 = 2.0f * u;
  const float a = select(u < 0.0f, -a2, a2);
  return exp_nonneg(select(a > 40.0f, 40.0f, a));  // NaN stays NaN
}
}  // namespace

void gelu_forward(const float* x, float* y, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    const float t = 2.0f / (exp_2abs(u) + 1.0f);  // 1 - tanh|u|
    const float half_vt = 0.5f * v * t;
    // 0.5 x (1 + tanh u) = u < 0 ? x t/2 : x - x t/2, x added last (see the top)
    const float out = select(u <= 0.0f, half_vt, v - half_vt);  // <=: -0 stays -0
    y[i] = select(v > kTail, v, select(v < -kTail, 0.0f, out));
  }
}

void gelu_backward(const float* x, const float* dy, float* dx, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    const float t = 2.0f / (exp_2abs(u) + 1.0f);  // 1 - tanh|u|
    const bool negative = u < 0.0f;
    const float half_t = 0.5f * t;
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    const float sech2_term = 0.5f * v * (t * (2.0f - t)) * dinner;
    // 0.5 (1 + tanh u) = u < 0 ? t/2 : 1 - t/2; the 1 is added last, once, to two
    // small terms whose roundings are small.
    const float g = select(negative, 0.0f, 1.0f) + (sech2_term + select(negative, half_t, -half_t));
    const float slope = select(v > kTail, 1.0f, select(v < -kTail, 0.0f, g));
    dx[i] = dy[i] * slope;
  }
}

}  // namespace tandem::cpu
