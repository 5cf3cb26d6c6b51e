#include "kernels/cpu/im2col.hpp"

#include <algorithm>
#include <cstring>

namespace tandem::cpu {

namespace {

// Outputs x in [lo, hi) read inside the input (0 <= x * stride - pad + offset < size);
// the rest read padding. Worked out once per kernel column, so the inner loops run
// without a bounds test per element (im2col was most of a small ResNet's step).
void inside_range(int out_size, int stride, int pad, int offset, int size, int& lo, int& hi) {
  auto ceil_div = [](int a, int b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  lo = std::clamp(ceil_div(pad - offset, stride), 0, out_size);
  hi = std::clamp(ceil_div(size + pad - offset, stride), lo, out_size);
}

}  // namespace

void im2col(const float* image, int channels, int height, int width, int kh, int kw, int pad, int stride,
            float* columns) {
  const int oh = conv_out_size(height, kh, pad, stride), ow = conv_out_size(width, kw, pad, stride);
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < kh; ++i) {
      int y0, y1;
      inside_range(oh, stride, pad, i, height, y0, y1);
      for (int j = 0; j < kw; ++j) {
        float* out = columns + ((static_cast<size_t>(c) * kh + i) * kw + j) * oh * ow;
        int x0, x1;
        inside_range(ow, stride, pad, j, width, x0, x1);
        std::memset(out, 0, sizeof(float) * static_cast<size_t>(y0) * ow);
        for (int y = y0; y < y1; ++y) {
          float* out_row = out + static_cast<size_t>(y) * ow;
          // The input row, from the first pixel output x0 reads.
          const float* in = image + (static_cast<size_t>(c) * height + (y * stride - pad + i)) * width +
                            (x0 * stride - pad + j);
          std::fill(out_row, out_row + x0, 0.0f);
          if (stride == 1) {
            std::memcpy(out_row + x0, in, sizeof(float) * static_cast<size_t>(x1 - x0));
          } else {
            for (int x = x0; x < x1; ++x) out_row[x] = in[(x - x0) * stride];
          }
          std::fill(out_row + x1, out_row + ow, 0.0f);
        }
        std::memset(out + static_cast<size_t>(y1) * ow, 0, sizeof(float) * static_cast<size_t>(oh - y1) * ow);
      }
    }
}

void col2im(const float* columns, int channels, int height, int width, int kh, int kw, int pad, int stride,
            float* image) {
  const int oh = conv_out_size(height, kh, pad, stride), ow = conv_out_size(width, kw, pad, stride);
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < kh; ++i) {
      int y0, y1;
      inside_range(oh, stride, pad, i, height, y0, y1);
      for (int j = 0; j < kw; ++j) {
        const float* in = columns + ((static_cast<size_t>(c) * kh + i) * kw + j) * oh * ow;
        int x0, x1;
        inside_range(ow, stride, pad, j, width, x0, x1);
        for (int y = y0; y < y1; ++y) {
          float* out = image + (static_cast<size_t>(c) * height + (y * stride - pad + i)) * width +
                       (x0 * stride - pad + j);
          const float* in_row = in + static_cast<size_t>(y) * ow;
          for (int x = x0; x < x1; ++x) out[(x - x0) * stride] += in_row[x];
        }
      }
    }
}

}  // namespace tandem::cpu
