#pragma once
// The SGD update (momentum, weight decay, Nesterov) fused over the whole flat
// parameter buffer in one pass, with the 1/B scaling of the SUM-reduced gradient
// folded in. Semantics follow torch.optim.SGD so results compare one to one.
#include <cstddef>

namespace tandem::cpu {

void sgd_step(float* param, const float* grad, float* velocity, size_t count, float lr, float momentum,
              float weight_decay, float grad_scale, bool nesterov);

}  // namespace tandem::cpu
