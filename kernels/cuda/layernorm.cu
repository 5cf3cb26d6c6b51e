// Layer normalisation.
//
// Forward: one warp per row, lanes striding over dim; two passes for the statistics
// (the mean, then the sum of squared deviations from it: no cancellation, unlike
// E[x^2] - E[x]^2) and a third for y, the second and third from L1. Sums are in float
// per lane, then xor shuffles: within float rounding of the CPU's double for rows of
// thousands of columns.
//
// Backward, dx: one warp per row, the same shape: one pass for the two row means
// (of g = dy * gamma and of g * xhat), one for dx. It runs after the column sums, so
// dx may overwrite dy or x (in place), as on the CPU.
//
// Backward, dgamma and dbeta: column sums of dy * xhat and dy over rows, in double.
// A block of 32 columns x 8 row lanes covers a split of the rows (about 256); lanes
// read 128 contiguous bytes of a row; the 8 row lanes meet in a fixed tree in shared
// memory; with more than one split a second kernel (detail::sum_partials) adds the
// splits in order. Deterministic: the order of additions depends only on the shape.
#include <cmath>

#include "kernels/cuda/launch_check.cuh"
#include "kernels/cuda/layernorm.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
using detail::warp_sum;
using detail::kWarps;
constexpr int kLnTileCols = 32;
constexpr int kLnRowLanes = kBlock / kLnTileCols;
constexpr int kLnRowsPerSplit = 256;
constexpr int kLnMaxSplits = 1024;

__global__ void __launch_bounds__(kBlock) layernorm_forward_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                                         const float* __restrict__ beta, int rows, int dim, float eps,
                                                         float* __restrict__ y, float* __restrict__ mean,
                                                         float* __restrict__ rstd) {
  const int lane = threadIdx.x % 32;
  const size_t r = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= static_cast<size_t>(rows)) return;  // warp-uniform
  const float* xr = x + r * dim;
  float sum = 0.0f;
  for (int c = lane; c < dim; c += 32) sum += xr[c];
  const float mu = warp_sum(sum) / static_cast<float>(dim);
  float sq = 0.0f;
  for (int c = lane; c < dim; c += 32) {
    const float d = xr[c] - mu;
    sq += d * d;
  }
  const float rs = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(dim) + eps);
  float* yr = y + r * dim;
  for (int c = lane; c < dim; c += 32) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
  if (lane == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

// dx may be dy or x: a lane writes only its own columns, after the shuffles that every
// lane reaches after its last read of the row, and each write follows that lane's own
// read of the same element; so no __restrict__ on the three.
__global__ void __launch_bounds__(kBlock) dx_kernel(const float* dy, const float* x, const float* __restrict__ gamma,
                                                    const float* __restrict__ mean, const float* __restrict__ rstd,
                                                    int rows, int dim, float* dx) {
  const int lane = threadIdx.x % 32;
  const size_t r = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= static_cast<size_t>(rows)) return;  // warp-uniform
  const float* xr = x + r * dim;
  const float* gr = dy + r * dim;
  const float mu = mean[r], rs = rstd[r];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int c = lane; c < dim; c += 32) {
    const float g = gr[c] * gamma[c];
    g_sum += g;
    gx_sum += g * ((xr[c] - mu) * rs);
  }
  const float g_mean = warp_sum(g_sum) / static_cast<float>(dim);
  const float gx_mean = warp_sum(gx_sum) / static_cast<float>(dim);
  float* dxr = dx + r * dim;
  for (int c = lane; c < dim; c += 32) {
    const float xhat = (xr[c] - mu) * rs;
    dxr[c] = rs * (gr[c] * gamma[c] - g_mean - xhat * gx_mean);
  }
}

// partials[split * dim + c] = the split's sum of dy * xhat in column c, and
// partials[(splits + split) * dim + c] that of dy; with one split, straight into
// dgamma and dbeta.
__global__ void __launch_bounds__(kBlock) param_grad_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                                            const float* __restrict__ mean,
                                                            const float* __restrict__ rstd, int rows, int dim,
                                                            int rows_per_split, double* __restrict__ partials,
                                                            float* __restrict__ dgamma, float* __restrict__ dbeta) {
  __shared__ double pg[kLnRowLanes][kLnTileCols], pb[kLnRowLanes][kLnTileCols];
  const int lane = threadIdx.x % kLnTileCols, row_lane = threadIdx.x / kLnTileCols;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kLnTileCols + lane;
  const size_t r0 = static_cast<size_t>(blockIdx.y) * rows_per_split;
  const size_t r1 = r0 + rows_per_split < static_cast<size_t>(rows) ? r0 + rows_per_split : static_cast<size_t>(rows);
  double sg = 0.0, sb = 0.0;
  if (c < dim)
    for (size_t r = r0 + row_lane; r < r1; r += kLnRowLanes) {
      const float g = dy[r * dim + c];
      sg += static_cast<double>(g) * ((x[r * dim + c] - mean[r]) * rstd[r]);
      sb += g;
    }
  pg[row_lane][lane] = sg;
  pb[row_lane][lane] = sb;
  __syncthreads();
#pragma unroll
  for (int s = kLnRowLanes / 2; s > 0; s >>= 1) {
    if (row_lane < s) {
      pg[row_lane][lane] += pg[row_lane + s][lane];
      pb[row_lane][lane] += pb[row_lane + s][lane];
    }
    __syncthreads();
  }
  if (row_lane != 0 || c >= dim) return;
  if (gridDim.y == 1) {
    dgamma[c] = static_cast<float>(pg[0][lane]);
    dbeta[c] = static_cast<float>(pb[0][lane]);
  } else {
    partials[static_cast<size_t>(blockIdx.y) * dim + c] = pg[0][lane];
    partials[static_cast<size_t>(gridDim.y + blockIdx.y) * dim + c] = pb[0][lane];
  }
}

}  // namespace

void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim, float eps, float* y,
                       float* mean, float* rstd, cudaStream_t stream) {
  TANDEM_CHECK(rows >= 0 && dim > 0, "layernorm_forward: rows ", rows, " must not be negative and dim ", dim,
               " must be positive");
  if (rows == 0) return;
  TANDEM_CHECK(x && gamma && beta && y && mean && rstd, "layernorm_forward: a null pointer for ", rows, " x ", dim);
  layernorm_forward_kernel<<<detail::blocks_for(static_cast<size_t>(rows), kWarps), kBlock, 0, stream>>>(
      x, gamma, beta, rows, dim, eps, y, mean, rstd);
  TANDEM_CUDA_CHECK_LAUNCH("layernorm_forward", rows, " x ", dim, ", eps ", eps);
}

void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        int rows, int dim, float* dx, float* dgamma, float* dbeta, cudaStream_t stream) {
  TANDEM_CHECK(rows >= 0 && dim > 0, "layernorm_backward: rows ", rows, " must not be negative and dim ", dim,
               " must be positive");
  TANDEM_CHECK(dgamma && dbeta, "layernorm_backward: dgamma or dbeta is null for dim ", dim);
  TANDEM_CHECK(rows == 0 || (dy && x && gamma && mean && rstd && dx), "layernorm_backward: a null pointer for ",
               rows, " x ", dim);
  // No rows: one split that reads nothing and writes the empty sums (zeros).
  int splits = (rows + kLnRowsPerSplit - 1) / kLnRowsPerSplit;
  if (splits < 1) splits = 1;
  if (splits > kLnMaxSplits) splits = kLnMaxSplits;
  const int rows_per_split = rows > 0 ? (rows + splits - 1) / splits : 1;
  if (rows > 0) splits = (rows + rows_per_split - 1) / rows_per_split;  // none left empty by the rounding
  const unsigned col_blocks = static_cast<unsigned>((dim + kLnTileCols - 1) / kLnTileCols);
  detail::StreamScratch scratch(splits > 1 ? 2 * static_cast<size_t>(splits) * dim : 0, stream, "layernorm_backward");
  param_grad_kernel<<<dim3(col_blocks, static_cast<unsigned>(splits)), kBlock, 0, stream>>>(
      dy, x, mean, rstd, rows, dim, rows_per_split, scratch.get(), dgamma, dbeta);
  TANDEM_CUDA_CHECK_LAUNCH("layernorm_backward (dgamma, dbeta)", rows, " x ", dim, ", ", splits, " splits");
  if (splits > 1) {
    const unsigned blocks = detail::blocks_for(static_cast<size_t>(dim), kBlock);
    detail::sum_partials<float><<<blocks, kBlock, 0, stream>>>(scratch.get(), splits, static_cast<size_t>(dim),
                                                               dgamma);
    detail::sum_partials<float><<<blocks, kBlock, 0, stream>>>(scratch.get() + static_cast<size_t>(splits) * dim,
                                                               splits, static_cast<size_t>(dim), dbeta);
    TANDEM_CUDA_CHECK_LAUNCH("layernorm_backward (sum of splits)", rows, " x ", dim, ", ", splits, " splits");
  }

  // dx last: it may overwrite dy or x, which the column sums read.
  if (rows == 0) return;
  dx_kernel<<<detail::blocks_for(static_cast<size_t>(rows), kWarps), kBlock, 0, stream>>>(dy, x, gamma, mean, rstd,
                                                                                          rows, dim, dx);
  TANDEM_CUDA_CHECK_LAUNCH("layernorm_backward (dx)", rows, " x ", dim);
}

}  // namespace tandem::cuda
