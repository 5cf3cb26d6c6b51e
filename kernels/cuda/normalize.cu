// Raw bytes to normalised floats, y = x * scale + shift: a stream that reads 1 byte
// and writes 4 per element. When x is 4-byte and y 16-byte aligned, a thread turns
// one uchar4 into one float4 per iteration of a grid-stride loop; otherwise, and for
// the count % 4 tail, one byte at a time. nvcc may fuse the multiply-add, so values
// can differ from a CPU's x * scale + shift in the last bit.
#include "kernels/cuda/launch_check.cuh"
#include "kernels/cuda/normalize.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;

__global__ void __launch_bounds__(kBlock) normalize_u8_kernel(const uint8_t* __restrict__ x, float* __restrict__ y,
                                                              size_t count, float scale, float shift, bool vector) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  const size_t tid = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x;
  size_t done = 0;
  if (vector) {
    const size_t n4 = count / 4;
    const uchar4* x4 = reinterpret_cast<const uchar4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (size_t i = tid; i < n4; i += stride) {
      const uchar4 b = x4[i];
      y4[i] = make_float4(static_cast<float>(b.x) * scale + shift, static_cast<float>(b.y) * scale + shift,
                          static_cast<float>(b.z) * scale + shift, static_cast<float>(b.w) * scale + shift);
    }
    done = n4 * 4;
  }
  for (size_t i = done + tid; i < count; i += stride) y[i] = static_cast<float>(x[i]) * scale + shift;
}

}  // namespace

void normalize_u8(const uint8_t* x, float* y, size_t count, float scale, float shift, cudaStream_t stream) {
  if (count == 0) return;
  TANDEM_CHECK(x && y, "normalize_u8: a null pointer for ", count, " elements");
  const bool vector = reinterpret_cast<uintptr_t>(x) % 4 == 0 && detail::aligned16(y);
  const unsigned blocks = detail::blocks_for(vector ? count / 4 + 1 : count, kBlock);
  normalize_u8_kernel<<<blocks, kBlock, 0, stream>>>(x, y, count, scale, shift, vector);
  TANDEM_CUDA_CHECK_LAUNCH("normalize_u8", count, " bytes, scale ", scale, ", shift ", shift);
}

}  // namespace tandem::cuda
