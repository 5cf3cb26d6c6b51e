#pragma once
// Layer normalisation over the last dimension (torch.nn.LayerNorm: biased variance,
// eps inside the square root). Statistics in double on the CPU: this is the
// reference the CUDA kernel is tested against.
namespace tandem::cpu {

void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim, float eps, float* y,
                       float* mean, float* rstd);
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        int rows, int dim, float* dx, float* dgamma, float* dbeta);

}  // namespace tandem::cpu
