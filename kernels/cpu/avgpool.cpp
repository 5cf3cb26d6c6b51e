#include "kernels/cpu/avgpool.hpp"

#include <cstddef>

namespace tandem::cpu {

void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y) {
  const size_t rows = static_cast<size_t>(batch) * channels;
  for (size_t r = 0; r < rows; ++r) {
    const float* p = x + r * spatial;
    float s = 0.0f;
    for (int i = 0; i < spatial; ++i) s += p[i];
    y[r] = s / static_cast<float>(spatial);
  }
}

void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx) {
  const size_t rows = static_cast<size_t>(batch) * channels;
  for (size_t r = 0; r < rows; ++r) {
    const float g = dy[r] / static_cast<float>(spatial);
    float* p = dx + r * spatial;
    for (int i = 0; i < spatial; ++i) p[i] = g;
  }
}

}  // namespace tandem::cpu
