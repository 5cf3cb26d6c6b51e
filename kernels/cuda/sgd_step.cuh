#pragma once
// The SGD update fused over the whole flat parameter buffer, 1/B scaling folded in
// (kernels/cpu/sgd_step.hpp: torch.optim.SGD semantics).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::cuda {

void sgd_step(float* param, const float* grad, float* velocity, size_t count, float lr, float momentum,
              float weight_decay, float grad_scale, bool nesterov, cudaStream_t stream);
// The same with lr and grad_scale read from `step` (device memory, StepSlot doubles:
// kernels/step_rule.hpp); nothing changes when step[kStepFinite] is 0. What the
// engine calls: the values may be decided on the device, or change between replays
// of a captured step.
void sgd_step(float* param, const float* grad, float* velocity, size_t count, const double* step, float momentum,
              float weight_decay, bool nesterov, cudaStream_t stream);

}  // namespace tandem::cuda
