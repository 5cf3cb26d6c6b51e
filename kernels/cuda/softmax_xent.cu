// Softmax cross-entropy fused with its gradient and the accuracy count.
//
// A row is read from memory once and its gradient written once; each exponential is
// computed once, in double as in the CPU reference (the sum and the loss in double).
// The exponential is kept as a float between the passes, so the gradient is
// float(float(e) / sum) where the CPU computes float(e / sum): it can differ from
// the CPU's by one float ulp (the tests' tolerance is 1e-5), the price of not
// computing every exponential twice. Two layouts, by row length:
//
//  - Short rows (classes <= 32: the bundled classifiers' 10): a thread per row. A
//    block takes 256 consecutive rows, one contiguous span of memory: it reads the
//    span into shared memory coalesced, each thread works its row there (max and
//    arg-max, exponentials kept in place of the logits, then the gradient), and the
//    block writes the span back coalesced. A warp per row would leave most lanes
//    idle and chain every row's latency.
//    Rows longer than their classes (a padded vocabulary) take the warp layout.
//  - Longer rows: a warp per row. Up to 1024 classes a lane holds its 32 columns in
//    registers between the passes; beyond, it reads the row again (L1) and computes
//    the exponentials twice. Reductions inside the warp are xor shuffles, all 32
//    lanes active (the row loop is warp-uniform), so every lane ends with the same
//    value.
//
// The totals are deterministic: a thread (or warp) adds its rows' losses in row
// order, a block's threads meet in a fixed tree order, and the per-block partials are
// added in block order by a one-block second kernel (only when more than one block
// ran). The number of blocks depends only on the shape.
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
using detail::kWarps;
constexpr int kShortRow = 32;       // classes up to this: a thread per row
constexpr int kColumnsPerLane = 32;  // a warp per row holds up to 32 x 32 classes in registers
constexpr size_t kMaxRowBlocks = 2048;
using detail::kFullMask;

// Writes the block's loss and correct count to out[0], out[1] (adds them with
// `accumulate`): `partials` slot blockIdx.x, or the totals when the block ran alone.
// Every thread must call it.
__device__ __forceinline__ void block_totals(double loss, double right, double* shared, double* out,
                                             bool accumulate) {
  loss = detail::block_sum<kBlock>(loss, shared);
  right = detail::block_sum<kBlock>(right, shared);
  if (threadIdx.x == 0) {
    out[0] = accumulate ? out[0] + loss : loss;
    out[1] = accumulate ? out[1] + right : right;
  }
}

// A thread per row over tiles of kBlock rows (dynamic shared memory: kBlock * stride
// floats, stride = classes rounded up to an odd number: thread t's row starts at
// t * stride, so the 32 lanes of a warp reading their rows' column c hit 32 different
// banks). partials[2 * blockIdx.x + 0] = the block's loss sum, [+ 1] = its correct
// count. dlogits may be logits itself: a tile is read whole before any of it is
// written, and each tile is one block's.
__global__ void __launch_bounds__(kBlock) softmax_xent_short(const float* logits, const int32_t* __restrict__ labels,
                                                             int rows, int classes, float* dlogits,
                                                             double* __restrict__ partials, bool accumulate) {
  extern __shared__ float tile[];
  __shared__ double reduce[kBlock];
  const int stride = classes | 1;
  double loss = 0.0, right = 0.0;
  const size_t tiles = (static_cast<size_t>(rows) + kBlock - 1) / kBlock;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const size_t first = t * kBlock;
    const size_t left = static_cast<size_t>(rows) - first;
    const int n = left < static_cast<size_t>(kBlock) ? static_cast<int>(left) : kBlock;
    const size_t span = static_cast<size_t>(n) * classes;
    const float* src = logits + first * classes;
    __syncthreads();  // the last tile's stores have read the shared copy
    // Coalesced: consecutive threads read consecutive floats of the span.
    for (int i = threadIdx.x; i < static_cast<int>(span); i += kBlock) {
      const int row = i / classes;
      tile[row * stride + (i - row * classes)] = src[i];
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < n) {
      float* z = tile + threadIdx.x * stride;
      // Max and the first index reaching it, as the CPU reference scans.
      float best = z[0];
      int best_at = 0;
      for (int c = 1; c < classes; ++c)
        if (z[c] > best) {
          best = z[c];
          best_at = c;
        }
      const int32_t label = labels[first + threadIdx.x];
      const bool valid = label >= 0 && label < classes;
      const float z_label = valid ? z[label] : 0.0f;
      double sum = 0.0;
      for (int c = 0; c < classes; ++c) {
        const double e = exp(static_cast<double>(z[c] - best));
        sum += e;
        z[c] = static_cast<float>(e);
      }
      loss += valid ? log(sum) - static_cast<double>(z_label - best) : static_cast<double>(NAN);
      right += (valid && best_at == label) ? 1.0 : 0.0;
      if (dlogits) {
        const double inv = 1.0 / sum;
        for (int c = 0; c < classes; ++c) {
          float v = static_cast<float>(static_cast<double>(z[c]) * inv);
          if (c == label) v -= 1.0f;
          z[c] = v;
        }
      }
    }
    if (dlogits) {
      __syncthreads();
      float* dst = dlogits + first * classes;
      for (int i = threadIdx.x; i < static_cast<int>(span); i += kBlock) {
        const int row = i / classes;
        dst[i] = tile[row * stride + (i - row * classes)];
      }
    }
  }
  block_totals(loss, right, reduce, partials + 2 * static_cast<size_t>(blockIdx.x), accumulate);
}

// A warp per row. Columns > 0: a lane keeps columns lane, lane + 32, ... (Columns of
// them) in registers, for rows of up to 32 * Columns classes; Columns == 0: any row
// length, read again for each pass. Partials as above. dlogits may be logits itself
// (no __restrict__ on either): a lane overwrites only its own columns, and only after
// a __syncwarp that every lane reaches after its last read of the row.
template <int Columns>
__global__ void __launch_bounds__(kBlock) softmax_xent_rows(const float* logits, const int32_t* __restrict__ labels,
                                                            int rows, int classes, int ld, float* dlogits,
                                                            double* __restrict__ partials, bool accumulate) {
  __shared__ double reduce[kBlock];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double loss = 0.0, right = 0.0;
  float held[Columns > 0 ? Columns : 1];
  const size_t row_stride = static_cast<size_t>(gridDim.x) * kWarps;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kWarps + warp; r < static_cast<size_t>(rows); r += row_stride) {
    const float* z = logits + r * static_cast<size_t>(ld);
    // Max and the first index reaching it: each lane scans its columns in order, then
    // lanes meet preferring the larger value and, on a tie, the smaller index.
    float best = -INFINITY;
    int best_at = classes;  // a lane without columns never wins a tie
    if constexpr (Columns > 0) {
#pragma unroll
      for (int i = 0; i < Columns; ++i) {
        const int c = lane + 32 * i;
        held[i] = c < classes ? z[c] : 0.0f;
        if (c < classes && (best_at == classes || held[i] > best)) {
          best = held[i];
          best_at = c;
        }
      }
    } else {
      for (int c = lane; c < classes; c += 32) {
        const float v = z[c];
        if (best_at == classes || v > best) {
          best = v;
          best_at = c;
        }
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
    if constexpr (Columns > 0) {
#pragma unroll
      for (int i = 0; i < Columns; ++i)
        if (lane + 32 * i < classes) {
          const double e = exp(static_cast<double>(held[i] - best));
          sum += e;
          held[i] = static_cast<float>(e);
        }
    } else {
      for (int c = lane; c < classes; c += 32) sum += exp(static_cast<double>(z[c] - best));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFullMask, sum, offset);
    // xor partners add the same two numbers (a + b == b + a), so all lanes agree.

    if (lane == 0) {
      loss += valid ? log(sum) - static_cast<double>(z_label - best) : static_cast<double>(NAN);
      right += (valid && best_at == label) ? 1.0 : 0.0;
    }
    if (dlogits) {
      __syncwarp();  // orders every lane's reads of the row before any lane's writes (in place)
      float* g = dlogits + r * static_cast<size_t>(ld);
      const double inv = 1.0 / sum;
      if constexpr (Columns > 0) {
#pragma unroll
        for (int i = 0; i < Columns; ++i) {
          const int c = lane + 32 * i;
          if (c < classes) {
            float v = static_cast<float>(static_cast<double>(held[i]) * inv);
            if (c == label) v -= 1.0f;
            g[c] = v;
          }
        }
      } else {
        for (int c = lane; c < classes; c += 32) {
          float v = static_cast<float>(exp(static_cast<double>(z[c] - best)) * inv);
          if (c == label) v -= 1.0f;
          g[c] = v;
        }
      }
      for (int c = classes + lane; c < ld; c += 32) g[c] = 0.0f;  // padded columns: never predicted
    }
  }
  // Lane 0 of each warp holds its rows' sums; the other lanes add zeros.
  block_totals(loss, right, reduce, partials + 2 * static_cast<size_t>(blockIdx.x), accumulate);
}

// One block: totals = the sums over `blocks` partial pairs, in a fixed order.
__global__ void __launch_bounds__(kBlock) softmax_xent_totals(const double* __restrict__ partials, int blocks,
                                                              double* __restrict__ totals, bool accumulate) {
  __shared__ double shared[kBlock];
  double l = 0.0, k = 0.0;
  for (int b = threadIdx.x; b < blocks; b += kBlock) {
    l += partials[2 * b];
    k += partials[2 * b + 1];
  }
  l = detail::block_sum<kBlock>(l, shared);
  k = detail::block_sum<kBlock>(k, shared);
  if (threadIdx.x == 0) {
    totals[0] = accumulate ? totals[0] + l : l;
    totals[1] = accumulate ? totals[1] + k : k;
  }
}

}  // namespace

void softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits, double* totals,
                  cudaStream_t stream, bool accumulate, int ld) {
  if (ld == 0) ld = classes;
  TANDEM_CHECK(ld >= classes, "softmax_xent: rows of ", ld, " floats cannot hold ", classes, " classes");
  TANDEM_CHECK(rows >= 0 && classes >= 0, "softmax_xent: rows ", rows, " and classes ", classes,
               " must not be negative");
  TANDEM_CHECK(rows == 0 || classes > 0, "softmax_xent: ", rows, " rows of 0 classes");
  TANDEM_CHECK(totals, "softmax_xent: totals is null");
  TANDEM_CHECK(rows == 0 || (logits && labels), "softmax_xent: logits or labels is null for ", rows, " x ", classes);
  const bool short_rows = classes <= kShortRow && ld == classes;
  const size_t per_block = short_rows ? kBlock : kWarps;
  size_t blocks = (static_cast<size_t>(rows) + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;  // zero rows: one block writes the totals {0, 0}
  if (blocks > kMaxRowBlocks) blocks = kMaxRowBlocks;
  const size_t tile_bytes = short_rows ? sizeof(float) * kBlock * static_cast<size_t>(classes | 1) : 0;
  auto run = [&](double* out, bool add) {
    const unsigned grid = static_cast<unsigned>(blocks);
    if (short_rows)
      softmax_xent_short<<<grid, kBlock, tile_bytes, stream>>>(logits, labels, rows, classes, dlogits, out, add);
    else if (classes <= 32 * kColumnsPerLane)
      softmax_xent_rows<kColumnsPerLane>
          <<<grid, kBlock, 0, stream>>>(logits, labels, rows, classes, ld, dlogits, out, add);
    else
      softmax_xent_rows<0><<<grid, kBlock, 0, stream>>>(logits, labels, rows, classes, ld, dlogits, out, add);
  };
  if (blocks == 1) {
    run(totals, accumulate);
  } else {
    detail::StreamScratch partials(2 * blocks, stream, "softmax_xent");
    run(partials.get(), false);
    softmax_xent_totals<<<1, kBlock, 0, stream>>>(partials.get(), static_cast<int>(blocks), totals, accumulate);
  }
  TANDEM_CUDA_CHECK_LAUNCH("softmax_xent", rows, " x ", classes, dlogits ? " with gradient" : " without gradient");
}

}  // namespace tandem::cuda
