#pragma once
// Causal softmax over `mats` square seq x seq score matrices, scale folded in
// (kernels/cpu/causal_softmax.hpp; engine/core/device.hpp states the formulas):
// row i reads columns j <= i only and writes zeros above the diagonal. att may be
// scores (in place); dscores may be datt.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale, cudaStream_t stream);
void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq, float scale,
                             cudaStream_t stream);

}  // namespace tandem::cuda
