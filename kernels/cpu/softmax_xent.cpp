#include "kernels/cpu/softmax_xent.hpp"

#include <cmath>

#include "engine/core/error.hpp"

namespace tandem::cpu {

double softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                    int64_t* correct, int ld) {
  if (ld == 0) ld = classes;
  TANDEM_CHECK(ld >= classes, "softmax_xent: rows of ", ld, " floats cannot hold ", classes, " classes");
  double loss = 0.0;
  int64_t right = 0;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * ld;
    const int32_t label = labels[r];
    TANDEM_CHECK(label >= 0 && label < classes, "label ", label, " of row ", r, " is outside [0, ", classes, ")");
    int best = 0;
    float zmax = z[0];
    for (int c = 1; c < classes; ++c)
      if (z[c] > zmax) {
        zmax = z[c];
        best = c;
      }
    right += best == label;
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - zmax));
    const double log_sum = std::log(sum);
    loss += log_sum - static_cast<double>(z[label] - zmax);
    if (dlogits) {
      float* g = dlogits + static_cast<size_t>(r) * ld;
      const double inv = 1.0 / sum;
      for (int c = 0; c < classes; ++c) g[c] = static_cast<float>(std::exp(static_cast<double>(z[c] - zmax)) * inv);
      g[label] -= 1.0f;
      for (int c = classes; c < ld; ++c) g[c] = 0.0f;
    }
  }
  if (correct) *correct = right;
  return loss;
}

}  // namespace tandem::cpu
