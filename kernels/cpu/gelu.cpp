#include "kernels/cpu/gelu.hpp"

#include <cmath>

namespace tandem::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(const float* x, float* y, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

void gelu_backward(const float* x, const float* dy, float* dx, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float th = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * dinner);
  }
}

}  // namespace tandem::cpu
