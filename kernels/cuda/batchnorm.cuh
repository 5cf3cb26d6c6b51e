#pragma once
// Batch normalisation over [batch, channels, spatial] (kernels/cpu/batchnorm.hpp),
// split at the same seams: per-channel sums (which the engine adds up over workers),
// the normalisation, and the same two steps backward. sums are device buffers of
// 2 x channels doubles; the *_sums launchers overwrite them, deterministically.
#include <cuda_runtime_api.h>

namespace tandem::cuda {

void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums, cudaStream_t stream);
void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma, const float* beta,
                       int batch, int channels, int spatial, float* xhat, float* y, cudaStream_t stream);
void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial, double* sums,
                             cudaStream_t stream);
void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                        const double* sums, double count, int batch, int channels, int spatial, float* dx,
                        cudaStream_t stream);

}  // namespace tandem::cuda
