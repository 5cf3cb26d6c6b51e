#include "kernels/cpu/dropout.hpp"

#include <cstddef>

namespace tandem::cpu {

namespace {
// Forward and backward are the same map: multiply by mask/(1-p).
void apply_mask(const float* in, float* out, int rows, int cols, float p, uint64_t seed, int64_t first_row) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int r = 0; r < rows; ++r) {
    const uint64_t row_key = seed ^ (static_cast<uint64_t>(first_row + r) * 0xd1b54a32d192ed03ULL);
    const float* a = in + static_cast<size_t>(r) * cols;
    float* b = out + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) b[c] = hash_uniform(row_key + static_cast<uint64_t>(c)) >= p ? a[c] * scale : 0.0f;
  }
}
}  // namespace

void dropout_forward(const float* x, float* y, int rows, int cols, float p, uint64_t seed, int64_t first_row) {
  apply_mask(x, y, rows, cols, p, seed, first_row);
}

void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, uint64_t seed, int64_t first_row) {
  apply_mask(dy, dx, rows, cols, p, seed, first_row);
}

}  // namespace tandem::cpu
