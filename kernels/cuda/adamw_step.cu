// AdamW over a range of the flat parameter buffer: a pure stream (param, m, v read and
// written, grad read), one element per thread per iteration of a grid-stride loop.
// The per-call constants (the decay factor, lr / bias_correction1,
// sqrt(bias_correction2)) are computed on the host in float exactly as
// kernels/cpu/adamw_step.cpp computes them, and the per-element formula is the CPU's
// in float; nvcc may fuse a multiply and an add, so results differ from the CPU by
// float rounding only. The engine's form reads those constants from the step's
// scalars in device memory instead (kernels/step_rule.hpp), computing them alike.
#include <cmath>

#include "kernels/cuda/adamw_step.cuh"
#include "kernels/cuda/launch_check.cuh"
#include "kernels/step_rule.hpp"

namespace tandem::cuda {

namespace {

using detail::kBlock;

struct AdamwParams {
  float beta1, beta2, eps, grad_scale, decay, step_size, bc2_sqrt;
};

// step (device memory, kernels/step_rule.hpp) or null: with it, the per-step constants
// come from there, each thread computing them as the host does (no contraction into
// an fma: __fmul_rn), and a step the device decided to skip does nothing.
__global__ void __launch_bounds__(kBlock) adamw_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                                       float* __restrict__ m, float* __restrict__ v, size_t count,
                                                       AdamwParams h, const double* __restrict__ step,
                                                       float weight_decay) {
  if (step) {
    if (step[kStepFinite] == 0.0) return;
    const auto lr = static_cast<float>(step[kStepLr]);
    h.grad_scale = static_cast<float>(step[kStepScale]);
    h.decay = 1.0f - __fmul_rn(lr, weight_decay);
    h.step_size = __fdiv_rn(lr, static_cast<float>(step[kStepBias1]));
    h.bc2_sqrt = __fsqrt_rn(static_cast<float>(step[kStepBias2]));
  }
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x; i < count; i += stride) {
    const float g = grad[i] * h.grad_scale;
    const float mi = h.beta1 * m[i] + (1.0f - h.beta1) * g;
    const float vi = h.beta2 * v[i] + (1.0f - h.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * h.decay - h.step_size * mi / (sqrtf(vi) / h.bc2_sqrt + h.eps);
  }
}

}  // namespace

void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, float lr, float beta1, float beta2,
                float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2,
                cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(param && grad && m && v, "adamw_step: a null pointer for ", count, " parameters");
  TANDEM_CHECK(bias_correction1 > 0.0f && bias_correction2 > 0.0f, "adamw_step: bias corrections ",
               bias_correction1, " and ", bias_correction2, " must be positive (1 - beta^step with step >= 1)");
  const AdamwParams h{beta1, beta2, eps, grad_scale, 1.0f - lr * weight_decay, lr / bias_correction1,
                      std::sqrt(bias_correction2)};
  adamw_kernel<<<detail::blocks_for(count, kBlock), kBlock, 0, stream>>>(param, grad, m, v, count, h, nullptr,
                                                                         weight_decay);
  TANDEM_CUDA_CHECK_LAUNCH("adamw_step", count, " parameters, lr ", lr, ", weight decay ", weight_decay);
}

void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, const double* step, float beta1,
                float beta2, float eps, float weight_decay, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(param && grad && m && v && step, "adamw_step: a null pointer for ", count, " parameters");
  const AdamwParams h{beta1, beta2, eps, 0.0f, 0.0f, 0.0f, 0.0f};  // the rest comes from step
  adamw_kernel<<<detail::blocks_for(count, kBlock), kBlock, 0, stream>>>(param, grad, m, v, count, h, step,
                                                                         weight_decay);
  TANDEM_CUDA_CHECK_LAUNCH("adamw_step (scalars on the device)", count, " parameters, weight decay ", weight_decay);
}

}  // namespace tandem::cuda
