#include "kernels/cpu/batchnorm.hpp"

#include <algorithm>

namespace tandem::cpu {

// Sums in double: a channel of a large batch adds up hundreds of thousands of values.
void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums) {
  std::fill(sums, sums + 2 * channels, 0.0);
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c) {
      const float* p = x + (static_cast<size_t>(n) * channels + c) * spatial;
      double s = 0.0, q = 0.0;
      for (int i = 0; i < spatial; ++i) {
        s += p[i];
        q += static_cast<double>(p[i]) * p[i];
      }
      sums[c] += s;
      sums[channels + c] += q;
    }
}

void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma, const float* beta,
                       int batch, int channels, int spatial, float* xhat, float* y) {
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c) {
      const size_t base = (static_cast<size_t>(n) * channels + c) * spatial;
      const float m = mean[c], s = invstd[c], g = gamma[c], b = beta[c];
      for (int i = 0; i < spatial; ++i) {
        const float h = (x[base + i] - m) * s;
        xhat[base + i] = h;
        y[base + i] = g * h + b;
      }
    }
}

void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial, double* sums) {
  std::fill(sums, sums + 2 * channels, 0.0);
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c) {
      const size_t base = (static_cast<size_t>(n) * channels + c) * spatial;
      double s = 0.0, q = 0.0;
      for (int i = 0; i < spatial; ++i) {
        s += dy[base + i];
        q += static_cast<double>(dy[base + i]) * xhat[base + i];
      }
      sums[c] += s;
      sums[channels + c] += q;
    }
}

void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                        const double* sums, double count, int batch, int channels, int spatial, float* dx) {
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < channels; ++c) {
      const size_t base = (static_cast<size_t>(n) * channels + c) * spatial;
      const float k = gamma[c] * invstd[c];
      const float mean_dy = static_cast<float>(sums[c] / count);
      const float mean_dy_xhat = static_cast<float>(sums[channels + c] / count);
      for (int i = 0; i < spatial; ++i) dx[base + i] = k * (dy[base + i] - mean_dy - xhat[base + i] * mean_dy_xhat);
    }
}

}  // namespace tandem::cpu
