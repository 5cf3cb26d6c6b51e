// Causal softmax: one warp per row (mats * seq rows), lanes striding over the row's
// columns. Forward makes three passes over columns j <= i (the max of scale * s, the
// sum of exponentials, the normalised output), the second and third from L1; backward
// two (the dot of datt and att, then the gradient). Warp sums are xor shuffles over
// all 32 lanes (the row loop is warp-uniform), a fixed order: deterministic.
//
// In place (att == scores, dscores == datt): a lane writes only its own columns, and
// its writes come after a shuffle reduction that every lane reaches after its last
// read of other passes, and each write follows that lane's own read of the same
// element; so no __restrict__ on the aliased pointers.
//
// The sums are in float (the CPU reference adds in double); for rows of a few
// thousand columns the difference stays at float rounding. expf, not __expf.
#include <cmath>

#include "kernels/cuda/causal_softmax.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
using detail::warp_sum;
using detail::kWarps;
using detail::kFullMask;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__global__ void __launch_bounds__(kBlock) causal_softmax_forward_kernel(const float* scores, float* att, size_t rows, int seq,
                                                         float scale) {
  const int lane = threadIdx.x % 32;
  const size_t row_stride = static_cast<size_t>(gridDim.x) * kWarps;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / 32; r < rows; r += row_stride) {
    const int i = static_cast<int>(r % static_cast<size_t>(seq));
    const float* s = scores + r * static_cast<size_t>(seq);
    float* a = att + r * static_cast<size_t>(seq);
    float zmax = -INFINITY;
    for (int j = lane; j <= i; j += 32) zmax = fmaxf(zmax, scale * s[j]);
    zmax = warp_max(zmax);
    float sum = 0.0f;
    for (int j = lane; j <= i; j += 32) sum += expf(scale * s[j] - zmax);
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    for (int j = lane; j < seq; j += 32) a[j] = j <= i ? expf(scale * s[j] - zmax) * inv : 0.0f;
  }
}

__global__ void __launch_bounds__(kBlock) causal_softmax_backward_kernel(const float* __restrict__ att, const float* datt,
                                                          float* dscores, size_t rows, int seq, float scale) {
  const int lane = threadIdx.x % 32;
  const size_t row_stride = static_cast<size_t>(gridDim.x) * kWarps;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / 32; r < rows; r += row_stride) {
    const int i = static_cast<int>(r % static_cast<size_t>(seq));
    const float* a = att + r * static_cast<size_t>(seq);
    const float* g = datt + r * static_cast<size_t>(seq);
    float* d = dscores + r * static_cast<size_t>(seq);
    float dot = 0.0f;
    for (int j = lane; j <= i; j += 32) dot += g[j] * a[j];
    dot = warp_sum(dot);
    for (int j = lane; j < seq; j += 32) d[j] = j <= i ? scale * a[j] * (g[j] - dot) : 0.0f;
  }
}

size_t checked_rows(const char* op, const void* in, const void* out, int64_t mats, int seq) {
  TANDEM_CHECK(mats >= 0 && seq >= 0, op, ": mats ", mats, " and seq ", seq, " must not be negative");
  const size_t rows = static_cast<size_t>(mats) * static_cast<size_t>(seq);
  TANDEM_CHECK(rows == 0 || (in && out), op, ": a null pointer for ", mats, " matrices of ", seq, " x ", seq);
  return rows;
}

}  // namespace

void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale, cudaStream_t stream) {
  const size_t rows = checked_rows("causal_softmax_forward", scores, att, mats, seq);
  if (rows == 0) return;
  causal_softmax_forward_kernel<<<detail::blocks_for(rows, kWarps), kBlock, 0, stream>>>(scores, att, rows, seq, scale);
  TANDEM_CUDA_CHECK_LAUNCH("causal_softmax_forward", mats, " matrices of ", seq, " x ", seq, ", scale ", scale);
}

void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq, float scale,
                             cudaStream_t stream) {
  const size_t rows = checked_rows("causal_softmax_backward", datt, dscores, mats, seq);
  if (rows == 0) return;
  TANDEM_CHECK(att, "causal_softmax_backward: att is null for ", mats, " matrices of ", seq, " x ", seq);
  causal_softmax_backward_kernel<<<detail::blocks_for(rows, kWarps), kBlock, 0, stream>>>(att, datt, dscores, rows, seq, scale);
  TANDEM_CUDA_CHECK_LAUNCH("causal_softmax_backward", mats, " matrices of ", seq, " x ", seq, ", scale ", scale);
}

}  // namespace tandem::cuda
