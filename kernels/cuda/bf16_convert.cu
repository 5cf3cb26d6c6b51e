// Pure streams, as elementwise.cu: four elements per thread per iteration of a
// grid-stride loop (a float4 against four bfloat16s, 8 bytes) when both pointers
// allow it, and a scalar loop for the tail or unaligned buffers.
#include <cuda_bf16.h>

#include "kernels/cuda/bf16_convert.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;

bool aligned8(const void* p) { return reinterpret_cast<uintptr_t>(p) % 8 == 0; }

// The two directions, four elements at a time (x4, y4: the i-th group of four) or one.
struct ToBf16 {
  using In = float;
  using Out = __nv_bfloat16;
  __device__ static void four(const In* x, Out* y, size_t i) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    __nv_bfloat162* y2 = reinterpret_cast<__nv_bfloat162*>(y);
    y2[2 * i] = __floats2bfloat162_rn(v.x, v.y);
    y2[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
  }
  __device__ static Out one(In v) { return __float2bfloat16_rn(v); }
};

struct FromBf16 {
  using In = __nv_bfloat16;
  using Out = float;
  __device__ static void four(const In* x, Out* y, size_t i) {
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(x);
    const float2 a = __bfloat1622float2(x2[2 * i]), b = __bfloat1622float2(x2[2 * i + 1]);
    reinterpret_cast<float4*>(y)[i] = make_float4(a.x, a.y, b.x, b.y);
  }
  __device__ static Out one(In v) { return __bfloat162float(v); }
};

template <typename C>
__global__ void __launch_bounds__(kBlock) convert_kernel(const typename C::In* __restrict__ x,
                                                         typename C::Out* __restrict__ y, size_t count, bool vector) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  const size_t tid = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t n4 = count / 4;
    for (size_t i = tid; i < n4; i += stride) C::four(x, y, i);
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < count; i += stride) y[i] = C::one(x[i]);
}

// The float side must be 16-byte aligned for a float4, the bfloat16 side 8-byte.
template <typename C>
void launch(const char* op, const void* x, void* y, size_t count, bool vector, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(x && y, op, ": a null pointer for ", count, " elements");
  const unsigned blocks = detail::blocks_for(vector ? count / 4 + 1 : count, kBlock);
  convert_kernel<C><<<blocks, kBlock, 0, stream>>>(static_cast<const typename C::In*>(x),
                                                   static_cast<typename C::Out*>(y), count, vector);
  TANDEM_CUDA_CHECK_LAUNCH(op, count, " elements");
}

}  // namespace

void to_bf16(const float* x, uint16_t* y, size_t count, cudaStream_t stream) {
  launch<ToBf16>("to_bf16", x, y, count, detail::aligned16(x) && aligned8(y), stream);
}

void from_bf16(const uint16_t* x, float* y, size_t count, cudaStream_t stream) {
  launch<FromBf16>("from_bf16", x, y, count, aligned8(x) && detail::aligned16(y), stream);
}

}  // namespace tandem::cuda
