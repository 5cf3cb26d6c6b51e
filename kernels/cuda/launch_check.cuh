#pragma once
// What every launcher under kernels/cuda shares: the check after a launch, the launch
// geometry, the stream-ordered scratch of the two-pass reductions, and the device
// helpers those reductions are built from. Host-only parts compile anywhere; the
// device parts only under nvcc. Nothing here synchronises.
//
// Reductions are deterministic by construction: which thread adds which value, and in
// what order the partial results meet, depends only on the shape, never on timing
// (fixed-order tree reductions in shared memory, a second kernel that adds the
// per-block partials in block order, no floating-point atomics). The same input thus
// gives bitwise the same sums on every run.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/core/error.hpp"

// After a launch: a launch that failed becomes a tandem::Error naming the op, its
// shape and CUDA's reason. cudaGetLastError also reports a fault left by an earlier
// asynchronous kernel, hence the hint.
#define TANDEM_CUDA_CHECK_LAUNCH(op, ...)                                                                     \
  do {                                                                                                        \
    const cudaError_t tandem_launch_err_ = cudaGetLastError();                                                \
    if (tandem_launch_err_ != cudaSuccess)                                                                    \
      ::tandem::fail(::tandem::detail::concat("CUDA kernel ", op, " (", __VA_ARGS__, ") failed: ",           \
                                              cudaGetErrorName(tandem_launch_err_), ": ",                     \
                                              cudaGetErrorString(tandem_launch_err_)),                        \
                     __FILE__, __LINE__,                                                                      \
                     "if the error is a fault, an earlier kernel may have caused it: run with "               \
                     "CUDA_LAUNCH_BLOCKING=1 to find the first one");                                         \
  } while (0)

namespace tandem::cuda::detail {

// Every 1-D kernel here runs blocks of this many threads (a multiple of the warp).
constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;        // warps per block
constexpr unsigned kFullMask = 0xffffffffu;  // every lane of a warp, for shuffles
// Loads in flight per thread in an elementwise stream's grid-stride loop.
constexpr int kUnroll = 4;
// Grid-stride loops cover the rest: 16384 blocks of 256 threads is ~15 resident waves
// on an H100 (132 SMs x 2048 threads), enough to keep memory busy, small enough that
// the loop indices below never overflow 32 bits for fewer than 2^31 elements.
constexpr size_t kMaxBlocks = 16384;

inline unsigned blocks_for(size_t work, size_t per_block) {
  size_t blocks = (work + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Index arithmetic (div/mod for a column or channel) is several times cheaper in 32
// bits; a tensor of fewer than 2^31 elements uses it. With grid strides of at most
// kMaxBlocks * kBlock * 4 = 2^24, i + stride then stays below 2^32.
inline bool fits_32bit(size_t count) { return count < (size_t{1} << 31); }

// Device memory for the partial results of a two-pass reduction, allocated and freed
// in stream order (cudaMallocAsync: no synchronisation, and the pool hands the same
// memory back on the next call).
class StreamScratch {
public:
  StreamScratch(size_t doubles, cudaStream_t stream, const char* op) : stream_(stream) {
    if (doubles == 0) return;
    const cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&p_), doubles * sizeof(double), stream);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // do not leave the error to be blamed on a later launch
      p_ = nullptr;
      ::tandem::fail(::tandem::detail::concat("CUDA kernel ", op, ": no device memory for ", doubles * sizeof(double),
                                              " bytes of partial sums: ", cudaGetErrorString(err)),
                     __FILE__, __LINE__, "reduce the local batch or the model");
    }
  }
  ~StreamScratch() {
    if (p_) (void)cudaFreeAsync(p_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  double* get() const { return p_; }

private:
  cudaStream_t stream_;
  double* p_ = nullptr;
};

}  // namespace tandem::cuda::detail

#ifdef __CUDACC__
namespace tandem::cuda::detail {
namespace {

// The sum of v over a block of Block threads, in a fixed tree order; every thread
// gets the result. Every thread of the block must call it (it synchronises), with
// `shared` a __shared__ array of Block elements. The leading barrier lets a block call
// it several times in a row with the same array.
template <int Block, typename T>
__device__ __forceinline__ T block_sum(T v, T* shared) {
  static_assert((Block & (Block - 1)) == 0, "block_sum needs a power-of-two block");
  __syncthreads();
  shared[threadIdx.x] = v;
  __syncthreads();
#pragma unroll
  for (int s = Block / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  return shared[0];
}

// The sum of v over the 32 lanes of a warp by xor shuffles, a fixed order; every lane
// gets the result. All 32 lanes must call it (a warp-uniform loop around it).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The second pass: out[k] = sum over s = 0 .. splits-1, in that order, of
// partials[s * width + k]. Reads are coalesced along k.
template <typename Out>
__global__ void __launch_bounds__(kBlock) sum_partials(const double* __restrict__ partials, int splits,
                                                       size_t width, Out* __restrict__ out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < width; k += stride) {
    double s = 0.0;
    for (int i = 0; i < splits; ++i) s += partials[static_cast<size_t>(i) * width + k];
    out[k] = static_cast<Out>(s);
  }
}

}  // namespace
}  // namespace tandem::cuda::detail
#endif
