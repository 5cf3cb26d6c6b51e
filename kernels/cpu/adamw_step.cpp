#include "kernels/cpu/adamw_step.hpp"

#include <cmath>

namespace tandem::cpu {

void adamw_step(float* __restrict param, const float* __restrict grad, float* __restrict m, float* __restrict v,
                size_t count, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                float bias_correction1, float bias_correction2) {
  const float decay = 1.0f - lr * weight_decay;
  const float step_size = lr / bias_correction1;
  const float bc2_sqrt = std::sqrt(bias_correction2);
  for (size_t i = 0; i < count; ++i) {
    const float g = grad[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * decay - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
  }
}

}  // namespace tandem::cpu
