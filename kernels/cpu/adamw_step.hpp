#pragma once
// The AdamW update fused over a range of the flat parameter buffer, torch.optim.AdamW
// semantics (decoupled weight decay, bias correction), with the 1/B scaling of the
// SUM-reduced gradient and the clipping factor folded into grad_scale.
#include <cstddef>

namespace tandem::cpu {

void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, float lr, float beta1, float beta2,
                float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2);

}  // namespace tandem::cpu
