#pragma once
// Bias gradients: column sums of a rows x cols matrix, and per-channel sums over
// [batch, channels, spatial] (kernels/cpu/bias_grad.hpp). Both overwrite db and are
// deterministic (fixed reduction order, no atomics).
#include <cuda_runtime_api.h>

namespace tandem::cuda {

void bias_grad(const float* dy, int rows, int cols, float* db, cudaStream_t stream);
void channel_bias_grad(const float* dy, int batch, int channels, int spatial, float* db, cudaStream_t stream);

}  // namespace tandem::cuda
