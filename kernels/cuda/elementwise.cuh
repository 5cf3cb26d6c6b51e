#pragma once
// The small elementwise ops a layer graph needs: fill, y = a + b (gradients meeting
// where a residual block forked) and y = relu(a + b) (a residual block's join).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::cuda {

void fill(float* y, size_t count, float value, cudaStream_t stream);
void add(const float* a, const float* b, float* y, size_t count, cudaStream_t stream);
void add_relu(const float* a, const float* b, float* y, size_t count, cudaStream_t stream);

}  // namespace tandem::cuda
