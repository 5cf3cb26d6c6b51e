#include "kernels/cpu/bias_grad.hpp"

#include <algorithm>

namespace tandem::cpu {

void bias_grad(const float* __restrict dy, int rows, int cols, float* __restrict db) {
  std::fill(db, db + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) db[c] += row[c];
  }
}

void channel_bias_grad(const float* __restrict dy, int batch, int channels, int spatial, float* __restrict db) {
  for (int c = 0; c < channels; ++c) {
    double sum = 0.0;  // spatial planes are long; accumulate in double
    for (int n = 0; n < batch; ++n) {
      const float* plane = dy + (static_cast<size_t>(n) * channels + c) * spatial;
      float s = 0.0f;
      for (int i = 0; i < spatial; ++i) s += plane[i];
      sum += s;
    }
    db[c] = static_cast<float>(sum);
  }
}

}  // namespace tandem::cpu
