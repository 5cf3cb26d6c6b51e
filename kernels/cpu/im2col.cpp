#include "kernels/cpu/im2col.hpp"

#include <cstring>

namespace tandem::cpu {

void im2col(const float* image, int channels, int height, int width, int kh, int kw, int pad, int stride,
            float* columns) {
  const int oh = conv_out_size(height, kh, pad, stride), ow = conv_out_size(width, kw, pad, stride);
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < kh; ++i)
      for (int j = 0; j < kw; ++j) {
        float* out = columns + ((static_cast<size_t>(c) * kh + i) * kw + j) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int iy = y * stride - pad + i;
          float* out_row = out + static_cast<size_t>(y) * ow;
          if (iy < 0 || iy >= height) {
            std::memset(out_row, 0, sizeof(float) * ow);
            continue;
          }
          const float* in_row = image + (static_cast<size_t>(c) * height + iy) * width;
          for (int x = 0; x < ow; ++x) {
            const int ix = x * stride - pad + j;
            out_row[x] = (ix >= 0 && ix < width) ? in_row[ix] : 0.0f;
          }
        }
      }
}

void col2im(const float* columns, int channels, int height, int width, int kh, int kw, int pad, int stride,
            float* image) {
  const int oh = conv_out_size(height, kh, pad, stride), ow = conv_out_size(width, kw, pad, stride);
  for (int c = 0; c < channels; ++c)
    for (int i = 0; i < kh; ++i)
      for (int j = 0; j < kw; ++j) {
        const float* in = columns + ((static_cast<size_t>(c) * kh + i) * kw + j) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int iy = y * stride - pad + i;
          if (iy < 0 || iy >= height) continue;
          float* out_row = image + (static_cast<size_t>(c) * height + iy) * width;
          const float* in_row = in + static_cast<size_t>(y) * ow;
          for (int x = 0; x < ow; ++x) {
            const int ix = x * stride - pad + j;
            if (ix >= 0 && ix < width) out_row[ix] += in_row[x];
          }
        }
      }
}

}  // namespace tandem::cpu
