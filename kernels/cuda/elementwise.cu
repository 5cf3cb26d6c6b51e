// fill, add and add_relu: pure streams with no index arithmetic, so one float4 per
// thread per iteration of a grid-stride loop (16-byte accesses, more bytes in flight
// per thread) when every pointer is 16-byte aligned, and a scalar loop for the
// count % 4 tail or unaligned buffers. y may be a or b (in place): every element is
// read and written by the same thread, so no __restrict__ on the add kernels.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;

__global__ void __launch_bounds__(kBlock) fill_kernel(float* y, size_t count, float value, bool vector) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  const size_t tid = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t n4 = count / 4;
    float4* y4 = reinterpret_cast<float4*>(y);
    const float4 v = make_float4(value, value, value, value);
    for (size_t i = tid; i < n4; i += stride) y4[i] = v;
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < count; i += stride) y[i] = value;
}

// The CPU's `v > 0 ? v : 0` (NaN becomes 0, as there).
template <bool Relu>
__device__ __forceinline__ float join(float a, float b) {
  const float v = a + b;
  return Relu ? (v > 0.0f ? v : 0.0f) : v;
}

template <bool Relu>
__global__ void __launch_bounds__(kBlock) add_kernel(const float* a, const float* b, float* y, size_t count,
                                                     bool vector) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  const size_t tid = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t n4 = count / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (size_t i = tid; i < n4; i += stride) {
      const float4 u = a4[i], v = b4[i];
      y4[i] = make_float4(join<Relu>(u.x, v.x), join<Relu>(u.y, v.y), join<Relu>(u.z, v.z), join<Relu>(u.w, v.w));
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < count; i += stride) y[i] = join<Relu>(a[i], b[i]);
}

template <bool Relu>
void launch_add(const char* op, const float* a, const float* b, float* y, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(a && b && y, op, ": a null pointer for ", count, " elements");
  const bool vector = detail::aligned16(a) && detail::aligned16(b) && detail::aligned16(y);
  const unsigned blocks = detail::blocks_for(vector ? count / 4 + 1 : count, kBlock);
  add_kernel<Relu><<<blocks, kBlock, 0, stream>>>(a, b, y, count, vector);
  TANDEM_CUDA_CHECK_LAUNCH(op, count, " elements");
}

}  // namespace

void fill(float* y, size_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(y, "fill: y is null for ", count, " elements");
  const bool vector = detail::aligned16(y);
  const unsigned blocks = detail::blocks_for(vector ? count / 4 + 1 : count, kBlock);
  fill_kernel<<<blocks, kBlock, 0, stream>>>(y, count, value, vector);
  TANDEM_CUDA_CHECK_LAUNCH("fill", count, " elements with ", value);
}

void add(const float* a, const float* b, float* y, size_t count, cudaStream_t stream) {
  launch_add<false>("add", a, b, y, count, stream);
}

void add_relu(const float* a, const float* b, float* y, size_t count, cudaStream_t stream) {
  launch_add<true>("add_relu", a, b, y, count, stream);
}

}  // namespace tandem::cuda
