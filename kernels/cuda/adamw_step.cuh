#pragma once
// The AdamW update fused over a range of the flat parameter buffer
// (kernels/cpu/adamw_step.hpp; the formula is in engine/core/device.hpp): 1/B and the
// clipping factor folded into grad_scale; bias corrections 1 - beta^step from the host.
// param, m and v are read and written, grad read; all four are count floats.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace tandem::cuda {

void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, float lr, float beta1, float beta2,
                float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2,
                cudaStream_t stream);
// The same with lr, grad_scale and the bias corrections read from `step` (device
// memory, StepSlot doubles: kernels/step_rule.hpp); nothing changes when
// step[kStepFinite] is 0. What the engine calls: the values may be decided on the
// device, or change between replays of a captured step.
void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, const double* step, float beta1,
                float beta2, float eps, float weight_decay, cudaStream_t stream);

}  // namespace tandem::cuda
