#pragma once
// 2-D max pooling (no padding) over NCHW, keeping each output's arg-max so the
// backward pass routes the gradient to exactly one input.
#include <cstdint>

namespace tandem::cpu {

inline int pool_out_size(int in, int k, int stride) { return (in - k) / stride + 1; }

void maxpool_forward(const float* x, int batch, int channels, int height, int width, int k, int stride, float* y,
                     int32_t* argmax);
void maxpool_backward(const float* dy, const int32_t* argmax, int batch, int channels, int height, int width,
                      int out_h, int out_w, float* dx);

}  // namespace tandem::cpu
