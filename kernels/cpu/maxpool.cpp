#include "kernels/cpu/maxpool.hpp"

#include <algorithm>
#include <limits>

namespace tandem::cpu {

void maxpool_forward(const float* x, int batch, int channels, int height, int width, int k, int stride, float* y,
                     int32_t* argmax) {
  const int oh = pool_out_size(height, k, stride), ow = pool_out_size(width, k, stride);
  for (int p = 0; p < batch * channels; ++p) {
    const float* in = x + static_cast<size_t>(p) * height * width;
    float* out = y + static_cast<size_t>(p) * oh * ow;
    int32_t* arg = argmax + static_cast<size_t>(p) * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        int32_t best_i = (oy * stride) * width + ox * stride;
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j) {
            const int32_t idx = (oy * stride + i) * width + (ox * stride + j);
            if (in[idx] > best) {
              best = in[idx];
              best_i = idx;
            }
          }
        out[oy * ow + ox] = best;
        arg[oy * ow + ox] = best_i;
      }
  }
}

void maxpool_backward(const float* dy, const int32_t* argmax, int batch, int channels, int height, int width,
                      int out_h, int out_w, float* dx) {
  std::fill(dx, dx + static_cast<size_t>(batch) * channels * height * width, 0.0f);
  for (int p = 0; p < batch * channels; ++p) {
    const float* g = dy + static_cast<size_t>(p) * out_h * out_w;
    const int32_t* arg = argmax + static_cast<size_t>(p) * out_h * out_w;
    float* out = dx + static_cast<size_t>(p) * height * width;
    for (int i = 0; i < out_h * out_w; ++i) out[arg[i]] += g[i];
  }
}

}  // namespace tandem::cpu
