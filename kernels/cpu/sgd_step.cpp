#include "kernels/cpu/sgd_step.hpp"

namespace tandem::cpu {

void sgd_step(float* __restrict param, const float* __restrict grad, float* __restrict velocity, size_t count,
              float lr, float momentum, float weight_decay, float grad_scale, bool nesterov) {
  if (momentum == 0.0f) {
    for (size_t i = 0; i < count; ++i) param[i] -= lr * (grad[i] * grad_scale + weight_decay * param[i]);
    return;
  }
  if (nesterov) {
    for (size_t i = 0; i < count; ++i) {
      const float g = grad[i] * grad_scale + weight_decay * param[i];
      const float v = momentum * velocity[i] + g;
      velocity[i] = v;
      param[i] -= lr * (g + momentum * v);
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      const float g = grad[i] * grad_scale + weight_decay * param[i];
      const float v = momentum * velocity[i] + g;
      velocity[i] = v;
      param[i] -= lr * v;
    }
  }
}

}  // namespace tandem::cpu
