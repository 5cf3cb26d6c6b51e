#pragma once
// GELU with the tanh approximation (kernels/cpu/gelu.hpp: GPT-2's, torch's
// approximate='tanh'). Backward takes forward's INPUT x. y may be x, and dx may be dy
// (in place): each element is read and written by one thread.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::cuda {

void gelu_forward(const float* x, float* y, size_t count, cudaStream_t stream);
void gelu_backward(const float* x, const float* dy, float* dx, size_t count, cudaStream_t stream);

}  // namespace tandem::cuda
