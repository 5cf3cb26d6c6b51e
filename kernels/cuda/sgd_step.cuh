#pragma once
// The SGD update fused over the whole flat parameter buffer, 1/B scaling folded in
// (kernels/cpu/sgd_step.hpp: torch.optim.SGD semantics).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::cuda {

void sgd_step(float* param, const float* grad, float* velocity, size_t count, float lr, float momentum,
              float weight_decay, float grad_scale, bool nesterov, cudaStream_t stream);

}  // namespace tandem::cuda
