#pragma once
// Layer normalisation over the last dimension of a rows x dim matrix
// (kernels/cpu/layernorm.hpp, torch.nn.LayerNorm: biased variance, eps inside the
// square root). Forward keeps mean and rstd (rows floats each) for backward.
// Backward OVERWRITES dx, and OVERWRITES dgamma and dbeta with their sums over rows
// (zeros for rows == 0); the sums are deterministic (no atomics). dx may be dy or x
// (in place).
#include <cuda_runtime_api.h>

namespace tandem::cuda {

void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim, float eps, float* y,
                       float* mean, float* rstd, cudaStream_t stream);
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        int rows, int dim, float* dx, float* dgamma, float* dbeta, cudaStream_t stream);

}  // namespace tandem::cuda
