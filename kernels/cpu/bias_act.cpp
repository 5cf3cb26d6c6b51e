#include "kernels/cpu/bias_act.hpp"

#include <algorithm>

namespace tandem::cpu {

namespace {
template <bool Relu>
inline void add_row(float* __restrict y, const float* __restrict bias, int cols) {
  if (bias) {
    for (int c = 0; c < cols; ++c) {
      float v = y[c] + bias[c];
      y[c] = Relu ? std::max(v, 0.0f) : v;
    }
  } else if (Relu) {
    for (int c = 0; c < cols; ++c) y[c] = std::max(y[c], 0.0f);
  }
}
}  // namespace

void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act) {
  for (int r = 0; r < rows; ++r) {
    float* row = y + static_cast<size_t>(r) * cols;
    if (act == Activation::relu)
      add_row<true>(row, bias, cols);
    else
      add_row<false>(row, bias, cols);
  }
}

void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial, Activation act) {
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c) {
      float* plane = y + (static_cast<size_t>(n) * channels + c) * spatial;
      const float b = bias ? bias[c] : 0.0f;
      if (act == Activation::relu)
        for (int i = 0; i < spatial; ++i) plane[i] = std::max(plane[i] + b, 0.0f);
      else
        for (int i = 0; i < spatial; ++i) plane[i] += b;
    }
}

void act_backward(const float* __restrict y, float* __restrict dy, size_t count, Activation act) {
  if (act != Activation::relu) return;
  for (size_t i = 0; i < count; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace tandem::cpu
