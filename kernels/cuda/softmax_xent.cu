// Softmax cross-entropy fused with its gradient and the accuracy count.
//
// One warp per row: classes is small (10 for the bundled models) and a warp covers
// up to 32 of them per pass with no shared memory; larger rows (thousands of classes)
// loop lane-strided. Three passes over a row (max and arg-max, sum of exponentials,
// gradient); the second and third hit L1. Reductions inside the warp are xor
// shuffles, all 32 lanes active (the row loop is warp-uniform), so every lane ends
// with the same value. Exponentials, the sum and the loss are in double as in the
// CPU reference.
//
// The totals are deterministic: each warp adds its rows' losses in row order, the 8
// warps of a block meet in a fixed order, and the per-block partials are added in
// block order by a one-block second kernel (only when more than one block ran). The
// number of blocks depends only on rows.
//
// A label outside [0, classes) cannot be reported from the device: that row reads
// nothing out of bounds, counts as wrong, adds NaN to the loss (so the error cannot
// pass unseen) and its gradient is the softmax alone.
#include <cmath>

#include "kernels/cuda/launch_check.cuh"
#include "kernels/cuda/softmax_xent.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
constexpr int kWarps = kBlock / 32;
constexpr size_t kMaxRowBlocks = 1024;
constexpr unsigned kFullMask = 0xffffffffu;

// partials[2 * blockIdx.x + 0] = the block's loss sum, [+ 1] = its correct count.
// dlogits may be logits itself (no __restrict__ on either): a lane overwrites only its
// own columns, and only after a __syncwarp that every lane reaches after its last read
// of the row.
__global__ void __launch_bounds__(kBlock) softmax_xent_rows(const float* logits, const int32_t* __restrict__ labels,
                                                            int rows, int classes, float* dlogits,
                                                            double* __restrict__ partials) {
  __shared__ double warp_loss[kWarps], warp_right[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double loss = 0.0, right = 0.0;
  const size_t row_stride = static_cast<size_t>(gridDim.x) * kWarps;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kWarps + warp; r < static_cast<size_t>(rows); r += row_stride) {
    const float* z = logits + r * static_cast<size_t>(classes);
    // Max and the first index reaching it, as the CPU's `if (z[c] > zmax)` scan finds:
    // each lane scans its columns in order, then lanes meet preferring the larger
    // value and, on a tie, the smaller index.
    float best = -INFINITY;
    int best_at = classes;  // a lane without columns never wins a tie
    for (int c = lane; c < classes; c += 32) {
      const float v = z[c];
      if (best_at == classes || v > best) {
        best = v;
        best_at = c;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(kFullMask, best, offset);
      const int other_at = __shfl_xor_sync(kFullMask, best_at, offset);
      if (other > best || (other == best && other_at < best_at)) {
        best = other;
        best_at = other_at;
      }
    }
    // With NaN logits the lanes may disagree; lane 0's answer is the row's.
    best = __shfl_sync(kFullMask, best, 0);
    best_at = __shfl_sync(kFullMask, best_at, 0);

    const int32_t label = labels[r];
    const bool valid = label >= 0 && label < classes;
    const float z_label = valid ? z[label] : 0.0f;

    double sum = 0.0;
    for (int c = lane; c < classes; c += 32) sum += exp(static_cast<double>(z[c] - best));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFullMask, sum, offset);
    // xor partners add the same two numbers (a + b == b + a), so all lanes agree.

    if (lane == 0) {
      loss += valid ? log(sum) - static_cast<double>(z_label - best) : static_cast<double>(NAN);
      right += (valid && best_at == label) ? 1.0 : 0.0;
    }
    if (dlogits) {
      __syncwarp();  // orders every lane's reads of the row before any lane's writes (in place)
      float* g = dlogits + r * static_cast<size_t>(classes);
      const double inv = 1.0 / sum;
      for (int c = lane; c < classes; c += 32) {
        float v = static_cast<float>(exp(static_cast<double>(z[c] - best)) * inv);
        if (c == label) v -= 1.0f;
        g[c] = v;
      }
    }
  }
  if (lane == 0) {
    warp_loss[warp] = loss;
    warp_right[warp] = right;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double l = 0.0, k = 0.0;
    for (int w = 0; w < kWarps; ++w) {
      l += warp_loss[w];
      k += warp_right[w];
    }
    partials[2 * static_cast<size_t>(blockIdx.x)] = l;
    partials[2 * static_cast<size_t>(blockIdx.x) + 1] = k;
  }
}

// One block: totals = the sums over `blocks` partial pairs, in a fixed order.
__global__ void __launch_bounds__(kBlock) softmax_xent_totals(const double* __restrict__ partials, int blocks,
                                                              double* __restrict__ totals) {
  __shared__ double shared[kBlock];
  double l = 0.0, k = 0.0;
  for (int b = threadIdx.x; b < blocks; b += kBlock) {
    l += partials[2 * b];
    k += partials[2 * b + 1];
  }
  l = detail::block_sum<kBlock>(l, shared);
  k = detail::block_sum<kBlock>(k, shared);
  if (threadIdx.x == 0) {
    totals[0] = l;
    totals[1] = k;
  }
}

}  // namespace

void softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits, double* totals,
                  cudaStream_t stream) {
  TANDEM_CHECK(rows >= 0 && classes >= 0, "softmax_xent: rows ", rows, " and classes ", classes,
               " must not be negative");
  TANDEM_CHECK(rows == 0 || classes > 0, "softmax_xent: ", rows, " rows of 0 classes");
  TANDEM_CHECK(totals, "softmax_xent: totals is null");
  TANDEM_CHECK(rows == 0 || (logits && labels), "softmax_xent: logits or labels is null for ", rows, " x ", classes);
  size_t blocks = (static_cast<size_t>(rows) + kWarps - 1) / kWarps;
  if (blocks < 1) blocks = 1;  // zero rows: one block writes the totals {0, 0}
  if (blocks > kMaxRowBlocks) blocks = kMaxRowBlocks;
  if (blocks == 1) {
    softmax_xent_rows<<<1, kBlock, 0, stream>>>(logits, labels, rows, classes, dlogits, totals);
  } else {
    detail::StreamScratch partials(2 * blocks, stream, "softmax_xent");
    softmax_xent_rows<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(logits, labels, rows, classes, dlogits,
                                                                           partials.get());
    softmax_xent_totals<<<1, kBlock, 0, stream>>>(partials.get(), static_cast<int>(blocks), totals);
  }
  TANDEM_CUDA_CHECK_LAUNCH("softmax_xent", rows, " x ", classes, dlogits ? " with gradient" : " without gradient");
}

}  // namespace tandem::cuda
