// The SGD update over the whole flat parameter buffer: a pure stream (param and
// velocity read and written, grad read), so the shape is one float4 per thread per
// iteration of a grid-stride loop (16-byte loads and stores, four values in flight
// per array) when every pointer the update touches is 16-byte aligned, and a scalar
// loop for the tail (count % 4) or for unaligned buffers. Momentum and Nesterov are
// template parameters, so each variant is a straight line. The formula is
// kernels/cpu/sgd_step.cpp's; nvcc may fuse a multiply and an add, so results differ
// from the CPU by float rounding only.
#include "kernels/cuda/launch_check.cuh"
#include "kernels/cuda/sgd_step.cuh"
#include "kernels/step_rule.hpp"

namespace tandem::cuda {

namespace {

using detail::kBlock;

struct SgdParams {
  float lr, momentum, weight_decay, grad_scale;
};

template <bool Momentum, bool Nesterov>
__device__ __forceinline__ void update(float& p, float grad, float& v, const SgdParams& h) {
  const float g = grad * h.grad_scale + h.weight_decay * p;
  if (!Momentum) {  // the reference leaves velocity alone when momentum is 0
    p -= h.lr * g;
    return;
  }
  const float nv = h.momentum * v + g;
  v = nv;
  p -= Nesterov ? h.lr * (g + h.momentum * nv) : h.lr * nv;
}

// step (device memory, kernels/step_rule.hpp) or null: with it, lr and the gradient's
// scale come from there, and a step the device decided to skip does nothing.
template <bool Momentum, bool Nesterov>
__global__ void __launch_bounds__(kBlock) sgd_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                                     float* __restrict__ velocity, size_t count, SgdParams h,
                                                     const double* __restrict__ step, bool vector) {
  if (step) {
    if (step[kStepFinite] == 0.0) return;
    h.lr = static_cast<float>(step[kStepLr]);
    h.grad_scale = static_cast<float>(step[kStepScale]);
  }
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  const size_t tid = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t n4 = count / 4;
    float4* p4 = reinterpret_cast<float4*>(param);
    const float4* g4 = reinterpret_cast<const float4*>(grad);
    float4* v4 = reinterpret_cast<float4*>(velocity);
    for (size_t i = tid; i < n4; i += stride) {
      float4 p = p4[i];
      const float4 g = g4[i];
      float4 v = Momentum ? v4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      update<Momentum, Nesterov>(p.x, g.x, v.x, h);
      update<Momentum, Nesterov>(p.y, g.y, v.y, h);
      update<Momentum, Nesterov>(p.z, g.z, v.z, h);
      update<Momentum, Nesterov>(p.w, g.w, v.w, h);
      p4[i] = p;
      if (Momentum) v4[i] = v;
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < count; i += stride) {
    float p = param[i], v = Momentum ? velocity[i] : 0.0f;
    update<Momentum, Nesterov>(p, grad[i], v, h);
    param[i] = p;
    if (Momentum) velocity[i] = v;
  }
}

}  // namespace

namespace {

void launch(float* param, const float* grad, float* velocity, size_t count, const SgdParams& h, const double* step,
            bool nesterov, cudaStream_t stream) {
  const bool with_momentum = h.momentum != 0.0f;
  TANDEM_CHECK(param && grad, "sgd_step: param or grad is null for ", count, " parameters");
  TANDEM_CHECK(velocity || !with_momentum, "sgd_step: momentum ", h.momentum, " needs a velocity buffer (",
               count, " parameters)");
  const bool vector =
      detail::aligned16(param) && detail::aligned16(grad) && (!with_momentum || detail::aligned16(velocity));
  const unsigned blocks = detail::blocks_for(vector ? count / 4 + 1 : count, kBlock);
  if (!with_momentum)
    sgd_kernel<false, false><<<blocks, kBlock, 0, stream>>>(param, grad, velocity, count, h, step, vector);
  else if (nesterov)
    sgd_kernel<true, true><<<blocks, kBlock, 0, stream>>>(param, grad, velocity, count, h, step, vector);
  else
    sgd_kernel<true, false><<<blocks, kBlock, 0, stream>>>(param, grad, velocity, count, h, step, vector);
  TANDEM_CUDA_CHECK_LAUNCH("sgd_step", count, " parameters, momentum ", h.momentum, nesterov ? ", nesterov" : "",
                           step ? ", scalars on the device" : "");
}

}  // namespace

void sgd_step(float* param, const float* grad, float* velocity, size_t count, float lr, float momentum,
              float weight_decay, float grad_scale, bool nesterov, cudaStream_t stream) {
  if (count == 0) return;
  launch(param, grad, velocity, count, SgdParams{lr, momentum, weight_decay, grad_scale}, nullptr, nesterov, stream);
}

void sgd_step(float* param, const float* grad, float* velocity, size_t count, const double* step, float momentum,
              float weight_decay, bool nesterov, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(step, "sgd_step: no step scalars for ", count, " parameters");
  launch(param, grad, velocity, count, SgdParams{0.0f, momentum, weight_decay, 0.0f}, step, nesterov, stream);
}

}  // namespace tandem::cuda
