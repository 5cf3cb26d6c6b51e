#pragma once
// Convolution lowering: one C x H x W image to a (C*kh*kw) x (oh*ow) column matrix
// so the convolution becomes one GEMM; col2im scatters columns back (accumulating),
// which is the input-gradient half of the backward pass.
namespace tandem::cpu {

inline int conv_out_size(int in, int k, int pad, int stride) { return (in + 2 * pad - k) / stride + 1; }

void im2col(const float* image, int channels, int height, int width, int kh, int kw, int pad, int stride,
            float* columns);
void col2im(const float* columns, int channels, int height, int width, int kh, int kw, int pad, int stride,
            float* image);

}  // namespace tandem::cpu
