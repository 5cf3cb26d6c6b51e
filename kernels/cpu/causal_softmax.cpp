#include "kernels/cpu/causal_softmax.hpp"

#include <cmath>
#include <cstddef>

namespace tandem::cpu {

void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale) {
  for (int64_t m = 0; m < mats; ++m)
    for (int i = 0; i < seq; ++i) {
      const size_t row = (static_cast<size_t>(m) * seq + i) * seq;
      const float* s = scores + row;
      float* a = att + row;
      float zmax = scale * s[0];
      for (int j = 1; j <= i; ++j) zmax = std::fmax(zmax, scale * s[j]);
      double sum = 0.0;
      for (int j = 0; j <= i; ++j) {
        const float e = std::exp(scale * s[j] - zmax);
        a[j] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int j = 0; j <= i; ++j) a[j] *= inv;
      for (int j = i + 1; j < seq; ++j) a[j] = 0.0f;
    }
}

void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq,
                             float scale) {
  for (int64_t m = 0; m < mats; ++m)
    for (int i = 0; i < seq; ++i) {
      const size_t row = (static_cast<size_t>(m) * seq + i) * seq;
      const float* a = att + row;
      const float* g = datt + row;
      float* d = dscores + row;
      double dot = 0.0;
      for (int j = 0; j <= i; ++j) dot += static_cast<double>(g[j]) * a[j];
      const float fdot = static_cast<float>(dot);
      for (int j = 0; j <= i; ++j) d[j] = scale * a[j] * (g[j] - fdot);
      for (int j = i + 1; j < seq; ++j) d[j] = 0.0f;
    }
}

}  // namespace tandem::cpu
