// Bias gradients, deterministic, accumulated in double.
//
// bias_grad (column sums of rows x cols): a block of 256 threads is 8 warps over a
// tile of 32 columns; lane = column, so every warp reads 128 contiguous bytes of a row;
// warp w adds rows w, w+8, ... of the block's row range (four loads in flight per
// thread), and the 8 partial sums of a column meet in a fixed tree in shared memory.
// Long inputs split their rows over gridDim.y blocks (about 256 rows each, at most
// 1024 splits); each writes its partial column sums, and a second kernel adds the
// splits in order. A layer's usual batch (<= 256 rows) is one split: one kernel, no
// scratch.
//
// channel_bias_grad ([batch, channels, spatial] summed over batch and spatial): one
// block per (channel, split of the batch x spatial values of that channel); threads
// walk the split's values 256 apart as (sample, position) pairs, so consecutive
// threads read consecutive positions of a plane; a fixed tree in shared memory, and
// the same second pass when a channel has more than one split.
#include "kernels/cuda/bias_grad.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
constexpr int kTileCols = 32;                     // one warp's lanes
constexpr int kRowLanes = kBlock / kTileCols;     // warps per block
constexpr int kRowsPerSplit = 256;                // target rows per block
constexpr int kValuesPerSplit = 8192;             // target values per block (channel sums)
constexpr int kMaxSplits = 1024;                  // gridDim.y stays far below 65535

// out[split * cols + col] = sum of dy[r, col] over the split's rows.
template <typename Out>
__global__ void __launch_bounds__(kBlock) column_sums(const float* __restrict__ dy, int rows, int cols,
                                                      int rows_per_split, Out* __restrict__ out) {
  __shared__ double partial[kRowLanes][kTileCols];
  const int lane = threadIdx.x % kTileCols, row_lane = threadIdx.x / kTileCols;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTileCols + lane;  // no int wrap near 2^31 columns
  const size_t r0 = static_cast<size_t>(blockIdx.y) * rows_per_split;
  const size_t r1 = r0 + rows_per_split < static_cast<size_t>(rows) ? r0 + rows_per_split : static_cast<size_t>(rows);
  double acc = 0.0;
  if (col < cols) {
    const float* p = dy + col;
    const size_t ld = static_cast<size_t>(cols);
    size_t r = r0 + row_lane;
    for (; r + 3 * kRowLanes < r1; r += 4 * kRowLanes) {
      const float a = p[r * ld], b = p[(r + kRowLanes) * ld], c = p[(r + 2 * kRowLanes) * ld],
                  d = p[(r + 3 * kRowLanes) * ld];
      acc += a;
      acc += b;
      acc += c;
      acc += d;
    }
    for (; r < r1; r += kRowLanes) acc += p[r * ld];
  }
  partial[row_lane][lane] = acc;
  __syncthreads();
#pragma unroll
  for (int s = kRowLanes / 2; s > 0; s >>= 1) {
    if (row_lane < s) partial[row_lane][lane] += partial[row_lane + s][lane];
    __syncthreads();
  }
  if (row_lane == 0 && col < cols)
    out[static_cast<size_t>(blockIdx.y) * cols + static_cast<size_t>(col)] = static_cast<Out>(partial[0][lane]);
}

// out[split * channels + c] = sum over the split's share of channel c's
// batch x spatial values. Split s covers values [s * per_split, (s+1) * per_split) of
// the channel, numbered e = n * spatial + i.
template <typename Out>
__global__ void __launch_bounds__(kBlock) bias_channel_sums(const float* __restrict__ dy, int batch, int channels,
                                                       int spatial, size_t per_split, Out* __restrict__ out) {
  __shared__ double shared[kBlock];
  const int c = blockIdx.x;
  const size_t values = static_cast<size_t>(batch) * static_cast<size_t>(spatial);
  const size_t e0 = static_cast<size_t>(blockIdx.y) * per_split;
  const size_t e1 = e0 + per_split < values ? e0 + per_split : values;
  double acc = 0.0;
  if (e0 + threadIdx.x < e1) {
    // Walk e = e0 + tid, += kBlock, keeping (n, i) = divmod(e, spatial) by additions.
    const size_t first = e0 + threadIdx.x;
    size_t n = first / static_cast<size_t>(spatial);
    int i = static_cast<int>(first % static_cast<size_t>(spatial));
    const size_t dn = kBlock / spatial;
    const int di = kBlock % spatial;
    const size_t plane_stride = static_cast<size_t>(channels) * static_cast<size_t>(spatial);
    const float* base = dy + static_cast<size_t>(c) * static_cast<size_t>(spatial);
    for (size_t e = first; e < e1; e += kBlock) {
      acc += base[n * plane_stride + static_cast<size_t>(i)];
      n += dn;
      i += di;
      if (i >= spatial) {
        i -= spatial;
        ++n;
      }
    }
  }
  acc = detail::block_sum<kBlock>(acc, shared);
  if (threadIdx.x == 0) out[static_cast<size_t>(blockIdx.y) * channels + c] = static_cast<Out>(acc);
}

int splits_for(size_t work, size_t per_block_target, size_t* per_split) {
  size_t splits = (work + per_block_target - 1) / per_block_target;
  if (splits < 1) splits = 1;
  if (splits > kMaxSplits) splits = kMaxSplits;
  *per_split = (work + splits - 1) / splits;
  // Drop splits the rounding left empty (work 0 keeps one split that writes zeros).
  if (*per_split > 0) splits = (work + *per_split - 1) / *per_split;
  if (splits < 1) splits = 1;
  return static_cast<int>(splits);
}

}  // namespace

void bias_grad(const float* dy, int rows, int cols, float* db, cudaStream_t stream) {
  TANDEM_CHECK(rows >= 0 && cols >= 0, "bias_grad: rows ", rows, " and cols ", cols, " must not be negative");
  if (cols == 0) return;
  TANDEM_CHECK(db, "bias_grad: db is null for ", cols, " columns");
  TANDEM_CHECK(rows == 0 || dy, "bias_grad: dy is null for ", rows, " x ", cols);
  size_t rows_per_split = 0;
  const int splits = splits_for(static_cast<size_t>(rows), kRowsPerSplit, &rows_per_split);
  const dim3 grid(static_cast<unsigned>((static_cast<size_t>(cols) + kTileCols - 1) / kTileCols),
                  static_cast<unsigned>(splits));
  if (splits == 1) {
    column_sums<float><<<grid, kBlock, 0, stream>>>(dy, rows, cols, static_cast<int>(rows_per_split), db);
  } else {
    detail::StreamScratch partials(static_cast<size_t>(splits) * cols, stream, "bias_grad");
    column_sums<double><<<grid, kBlock, 0, stream>>>(dy, rows, cols, static_cast<int>(rows_per_split),
                                                       partials.get());
    detail::sum_partials<float><<<detail::blocks_for(static_cast<size_t>(cols), kBlock), kBlock, 0, stream>>>(
        partials.get(), splits, static_cast<size_t>(cols), db);
  }
  TANDEM_CUDA_CHECK_LAUNCH("bias_grad", rows, " x ", cols, " in ", splits, " splits");
}

void channel_bias_grad(const float* dy, int batch, int channels, int spatial, float* db, cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && channels >= 0 && spatial >= 0, "channel_bias_grad: batch ", batch, ", channels ",
               channels, " and spatial ", spatial, " must not be negative");
  if (channels == 0) return;
  TANDEM_CHECK(db, "channel_bias_grad: db is null for ", channels, " channels");
  const size_t values = static_cast<size_t>(batch) * static_cast<size_t>(spatial);
  TANDEM_CHECK(values == 0 || dy, "channel_bias_grad: dy is null for ", batch, " x ", channels, " x ", spatial);
  size_t per_split = 0;
  const int splits = splits_for(values, kValuesPerSplit, &per_split);
  const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(splits));
  if (splits == 1) {
    bias_channel_sums<float><<<grid, kBlock, 0, stream>>>(dy, batch, channels, spatial, per_split, db);
  } else {
    detail::StreamScratch partials(static_cast<size_t>(splits) * channels, stream, "channel_bias_grad");
    bias_channel_sums<double><<<grid, kBlock, 0, stream>>>(dy, batch, channels, spatial, per_split, partials.get());
    detail::sum_partials<float><<<detail::blocks_for(static_cast<size_t>(channels), kBlock), kBlock, 0, stream>>>(
        partials.get(), splits, static_cast<size_t>(channels), db);
  }
  TANDEM_CUDA_CHECK_LAUNCH("channel_bias_grad", batch, " x ", channels, " x ", spatial, " in ", splits, " splits");
}

}  // namespace tandem::cuda
