// GELU (tanh approximation) forward and backward: elementwise streams, so a plain
// grid-stride loop, one element per thread per iteration; the formulas are
// kernels/cpu/gelu.cpp's, with tanhf (not the fast intrinsic) so results differ from
// the CPU by float rounding only. No __restrict__: y may be x and dx may be dy.
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void __launch_bounds__(kBlock) gelu_forward_kernel(const float* x, float* y, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x; i < count; i += stride) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

__global__ void __launch_bounds__(kBlock) gelu_backward_kernel(const float* x, const float* dy, float* dx,
                                                               size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x; i < count; i += stride) {
    const float v = x[i];
    const float th = tanhf(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * dinner);
  }
}

}  // namespace

void gelu_forward(const float* x, float* y, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(x && y, "gelu_forward: a null pointer for ", count, " elements");
  gelu_forward_kernel<<<detail::blocks_for(count, kBlock), kBlock, 0, stream>>>(x, y, count);
  TANDEM_CUDA_CHECK_LAUNCH("gelu_forward", count, " elements");
}

void gelu_backward(const float* x, const float* dy, float* dx, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(x && dy && dx, "gelu_backward: a null pointer for ", count, " elements");
  gelu_backward_kernel<<<detail::blocks_for(count, kBlock), kBlock, 0, stream>>>(x, dy, dx, count);
  TANDEM_CUDA_CHECK_LAUNCH("gelu_backward", count, " elements");
}

}  // namespace tandem::cuda
