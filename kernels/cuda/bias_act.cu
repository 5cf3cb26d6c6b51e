// Bias add fused with the activation, in place over the activations, and ReLU's
// backward. All three stream memory once with no reuse, so the shape is the plainest
// that keeps HBM busy: a grid-stride loop in which each thread first issues kUnroll
// independent coalesced loads (elements one block apart), then computes and stores,
// so every thread has several loads in flight. The column (or channel) of an element
// is an integer div/mod, done in 32 bits whenever the tensor has fewer than 2^31
// elements. act_backward has no index arithmetic and runs over float4 when both
// pointers are 16-byte aligned, with a scalar tail.
#include "kernels/cuda/bias_act.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
using detail::kUnroll;

// The CPU reference's std::max(v, 0.0f), NaN and -0.0 included.
__device__ __forceinline__ float relu(float v) { return v < 0.0f ? 0.0f : v; }

// y[i] = act(y[i] + bias[col(i)]), col(i) = i % cols (Channel: (i / spatial) % channels).
template <typename Index, bool Channel, bool Relu, bool HasBias>
__global__ void __launch_bounds__(kBlock) bias_act_kernel(float* y, const float* __restrict__ bias, Index count,
                                                          Index inner, Index outer) {
  // Dense: inner = 1, outer = cols. Channel: inner = spatial, outer = channels.
  const Index step = static_cast<Index>(gridDim.x) * (kBlock * kUnroll);
  for (Index base = static_cast<Index>(blockIdx.x) * (kBlock * kUnroll) + threadIdx.x; base < count; base += step) {
    float v[kUnroll], b[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      v[k] = 0.0f;
      b[k] = 0.0f;
      if (i < count) {
        v[k] = y[i];
        if (HasBias) b[k] = bias[Channel ? (i / inner) % outer : i % outer];
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      if (i < count) {
        // The channel reference adds its (possibly zero) bias even without one.
        const float s = (HasBias || Channel) ? v[k] + b[k] : v[k];
        y[i] = Relu ? relu(s) : s;
      }
    }
  }
}

template <typename Index, bool Channel>
void launch_bias_act(float* y, const float* bias, size_t count, size_t inner, size_t outer, Activation act,
                     cudaStream_t stream) {
  const unsigned blocks = detail::blocks_for(count, static_cast<size_t>(kBlock) * kUnroll);
  const Index n = static_cast<Index>(count), in = static_cast<Index>(inner), out = static_cast<Index>(outer);
  const bool relu_act = act == Activation::relu;
  if (bias && relu_act)
    bias_act_kernel<Index, Channel, true, true><<<blocks, kBlock, 0, stream>>>(y, bias, n, in, out);
  else if (bias)
    bias_act_kernel<Index, Channel, false, true><<<blocks, kBlock, 0, stream>>>(y, bias, n, in, out);
  else
    bias_act_kernel<Index, Channel, true, false><<<blocks, kBlock, 0, stream>>>(y, bias, n, in, out);
}

__global__ void __launch_bounds__(kBlock) relu_backward_kernel(const float* __restrict__ y, float* __restrict__ dy,
                                                               size_t count, bool vector) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  const size_t tid = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t n4 = count / 4;
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* d4 = reinterpret_cast<float4*>(dy);
    for (size_t i = tid; i < n4; i += stride) {
      const float4 a = y4[i];
      float4 d = d4[i];
      d.x = a.x > 0.0f ? d.x : 0.0f;
      d.y = a.y > 0.0f ? d.y : 0.0f;
      d.z = a.z > 0.0f ? d.z : 0.0f;
      d.w = a.w > 0.0f ? d.w : 0.0f;
      d4[i] = d;
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < count; i += stride) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace

void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act, cudaStream_t stream) {
  TANDEM_CHECK(rows >= 0 && cols >= 0, "bias_act_forward: rows ", rows, " and cols ", cols, " must not be negative");
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (count == 0 || (!bias && act != Activation::relu)) return;  // nothing to add, nothing to clamp
  TANDEM_CHECK(y, "bias_act_forward: y is null for ", rows, " x ", cols);
  if (detail::fits_32bit(count))
    launch_bias_act<uint32_t, false>(y, bias, count, 1, static_cast<size_t>(cols), act, stream);
  else
    launch_bias_act<uint64_t, false>(y, bias, count, 1, static_cast<size_t>(cols), act, stream);
  TANDEM_CUDA_CHECK_LAUNCH("bias_act_forward", rows, " x ", cols, bias ? " with bias" : " without bias",
                           act == Activation::relu ? ", relu" : "");
}

void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial, Activation act,
                              cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && channels >= 0 && spatial >= 0, "channel_bias_act_forward: batch ", batch,
               ", channels ", channels, " and spatial ", spatial, " must not be negative");
  const size_t count = static_cast<size_t>(batch) * static_cast<size_t>(channels) * static_cast<size_t>(spatial);
  if (count == 0 || (!bias && act != Activation::relu)) return;
  TANDEM_CHECK(y, "channel_bias_act_forward: y is null for ", batch, " x ", channels, " x ", spatial);
  if (detail::fits_32bit(count))
    launch_bias_act<uint32_t, true>(y, bias, count, static_cast<size_t>(spatial), static_cast<size_t>(channels), act,
                                    stream);
  else
    launch_bias_act<uint64_t, true>(y, bias, count, static_cast<size_t>(spatial), static_cast<size_t>(channels), act,
                                    stream);
  TANDEM_CUDA_CHECK_LAUNCH("channel_bias_act_forward", batch, " x ", channels, " x ", spatial,
                           bias ? " with bias" : " without bias", act == Activation::relu ? ", relu" : "");
}

void act_backward(const float* y, float* dy, size_t count, Activation act, cudaStream_t stream) {
  if (count == 0 || act != Activation::relu) return;  // the identity's derivative leaves dy as it is
  TANDEM_CHECK(y && dy, "act_backward: a null pointer for ", count, " elements");
  const bool vector = detail::aligned16(y) && detail::aligned16(dy);
  const unsigned blocks = detail::blocks_for(vector ? count / 4 + 1 : count, kBlock);
  relu_backward_kernel<<<blocks, kBlock, 0, stream>>>(y, dy, count, vector);
  TANDEM_CUDA_CHECK_LAUNCH("act_backward", count, " elements, relu");
}

}  // namespace tandem::cuda
