#pragma once
// Global average pooling [batch, channels, spatial] -> [batch, channels] and back
// (kernels/cpu/avgpool.hpp). Forward refuses spatial == 0 with a non-empty batch (the
// mean of an empty plane; the CPU would produce NaN).
#include <cuda_runtime_api.h>

namespace tandem::cuda {

void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y, cudaStream_t stream);
void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx, cudaStream_t stream);

}  // namespace tandem::cuda
