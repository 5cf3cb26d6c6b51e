// Batch normalisation over [batch, channels, spatial], at the seams of
// kernels/cpu/batchnorm.hpp.
//
// The two *_sums launchers reduce each channel's batch x spatial values into doubles
// (x and x^2, or dy and dy * xhat), deterministically: one block per (channel, split
// of that channel's values, about 8192 each, at most 1024 splits); threads walk the
// split 256 values apart as (sample, position) pairs kept by additions, so
// consecutive threads read consecutive positions of a plane; the block's sums meet in
// a fixed tree in shared memory; with more than one split a second kernel adds the
// splits of each channel in order. A channel of 8192 values or fewer is one split:
// one kernel writing `sums` directly.
//
// Forward and backward are elementwise streams: a grid-stride loop with 4 loads in
// flight per thread, the channel of an element an integer div/mod (32 bits below
// 2^31 elements); the per-channel parameters are tiny and stay in cache. Backward
// multiplies by 1/count where the CPU divides by count: the same to float rounding.
#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
using detail::kUnroll;
constexpr size_t kBnValuesPerSplit = 8192;
constexpr size_t kBnMaxSplits = 1024;

// out[split * 2C + c] = sum of u, out[split * 2C + C + c] = sum of u * (Backward ? w : u),
// over values [split * per_split, (split+1) * per_split) of channel c, numbered
// e = n * spatial + i.
template <bool Backward>
__global__ void __launch_bounds__(kBlock) bn_channel_sums(const float* __restrict__ u, const float* __restrict__ w,
                                                       int batch, int channels, int spatial, size_t per_split,
                                                       double* __restrict__ out) {
  __shared__ double shared[kBlock];
  const int c = blockIdx.x;
  const size_t values = static_cast<size_t>(batch) * static_cast<size_t>(spatial);
  const size_t e0 = static_cast<size_t>(blockIdx.y) * per_split;
  const size_t e1 = e0 + per_split < values ? e0 + per_split : values;
  double s = 0.0, q = 0.0;
  if (e0 + threadIdx.x < e1) {
    // Walk e = e0 + tid, += kBlock, keeping (n, i) = divmod(e, spatial) by additions.
    const size_t first = e0 + threadIdx.x;
    size_t n = first / static_cast<size_t>(spatial);
    int i = static_cast<int>(first % static_cast<size_t>(spatial));
    const size_t dn = kBlock / spatial;
    const int di = kBlock % spatial;
    const size_t plane_stride = static_cast<size_t>(channels) * static_cast<size_t>(spatial);
    const size_t offset = static_cast<size_t>(c) * static_cast<size_t>(spatial);
    for (size_t e = first; e < e1; e += kBlock) {
      const size_t at = offset + n * plane_stride + static_cast<size_t>(i);
      const double a = u[at];
      s += a;
      q += Backward ? a * static_cast<double>(w[at]) : a * a;
      n += dn;
      i += di;
      if (i >= spatial) {
        i -= spatial;
        ++n;
      }
    }
  }
  s = detail::block_sum<kBlock>(s, shared);
  q = detail::block_sum<kBlock>(q, shared);
  if (threadIdx.x == 0) {
    const size_t row = static_cast<size_t>(blockIdx.y) * 2 * static_cast<size_t>(channels);
    out[row + c] = s;
    out[row + channels + c] = q;
  }
}

template <bool Backward>
void launch_sums(const char* op, const float* u, const float* w, int batch, int channels, int spatial, double* sums,
                 cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && channels >= 0 && spatial >= 0, op, ": batch ", batch, ", channels ", channels,
               " and spatial ", spatial, " must not be negative");
  if (channels == 0) return;
  TANDEM_CHECK(sums, op, ": sums is null for ", channels, " channels");
  const size_t values = static_cast<size_t>(batch) * static_cast<size_t>(spatial);
  TANDEM_CHECK(values == 0 || (u && (w || !Backward)), op, ": an input is null for ", batch, " x ", channels, " x ",
               spatial);
  size_t splits = (values + kBnValuesPerSplit - 1) / kBnValuesPerSplit;
  if (splits < 1) splits = 1;
  if (splits > kBnMaxSplits) splits = kBnMaxSplits;
  size_t per_split = (values + splits - 1) / splits;
  if (per_split > 0) splits = (values + per_split - 1) / per_split;  // none left empty by the rounding
  const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(splits));
  if (splits == 1) {
    bn_channel_sums<Backward><<<grid, kBlock, 0, stream>>>(u, w, batch, channels, spatial, per_split, sums);
  } else {
    const size_t width = 2 * static_cast<size_t>(channels);
    detail::StreamScratch partials(splits * width, stream, op);
    bn_channel_sums<Backward><<<grid, kBlock, 0, stream>>>(u, w, batch, channels, spatial, per_split, partials.get());
    detail::sum_partials<double><<<detail::blocks_for(width, kBlock), kBlock, 0, stream>>>(
        partials.get(), static_cast<int>(splits), width, sums);
  }
  TANDEM_CUDA_CHECK_LAUNCH(op, batch, " x ", channels, " x ", spatial, " in ", splits, " splits");
}

template <typename Index>
// x, xhat and y may share storage (each element is read, then written, by one
// thread): no __restrict__ on them.
__global__ void __launch_bounds__(kBlock) batchnorm_forward_kernel(const float* x, const float* __restrict__ mean,
                                                         const float* __restrict__ invstd,
                                                         const float* __restrict__ gamma,
                                                         const float* __restrict__ beta, Index count, Index spatial,
                                                         Index channels, float* xhat, float* y) {
  const Index step = static_cast<Index>(gridDim.x) * (kBlock * kUnroll);
  for (Index base = static_cast<Index>(blockIdx.x) * (kBlock * kUnroll) + threadIdx.x; base < count; base += step) {
    float v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      v[k] = i < count ? x[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      if (i < count) {
        const Index c = (i / spatial) % channels;
        const float h = (v[k] - mean[c]) * invstd[c];
        xhat[i] = h;
        y[i] = gamma[c] * h + beta[c];
      }
    }
  }
}

template <typename Index>
// dx may be dy or xhat (in place): no __restrict__ on the three.
__global__ void __launch_bounds__(kBlock) batchnorm_backward_kernel(const float* dy, const float* xhat,
                                                          const float* __restrict__ gamma,
                                                          const float* __restrict__ invstd,
                                                          const double* __restrict__ sums, double inv_count,
                                                          Index count, Index spatial, Index channels, float* dx) {
  const Index step = static_cast<Index>(gridDim.x) * (kBlock * kUnroll);
  for (Index base = static_cast<Index>(blockIdx.x) * (kBlock * kUnroll) + threadIdx.x; base < count; base += step) {
    float g[kUnroll], h[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      g[k] = i < count ? dy[i] : 0.0f;
      h[k] = i < count ? xhat[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      if (i < count) {
        const Index c = (i / spatial) % channels;
        const float scale = gamma[c] * invstd[c];
        const float mean_dy = static_cast<float>(sums[c] * inv_count);
        const float mean_dy_xhat = static_cast<float>(sums[channels + c] * inv_count);
        dx[i] = scale * (g[k] - mean_dy - h[k] * mean_dy_xhat);
      }
    }
  }
}

void check_shape(const char* op, int batch, int channels, int spatial) {
  TANDEM_CHECK(batch >= 0 && channels >= 0 && spatial >= 0, op, ": batch ", batch, ", channels ", channels,
               " and spatial ", spatial, " must not be negative");
}

}  // namespace

void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums, cudaStream_t stream) {
  launch_sums<false>("batchnorm_sums", x, nullptr, batch, channels, spatial, sums, stream);
}

void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial, double* sums,
                             cudaStream_t stream) {
  launch_sums<true>("batchnorm_backward_sums", dy, xhat, batch, channels, spatial, sums, stream);
}

void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma, const float* beta,
                       int batch, int channels, int spatial, float* xhat, float* y, cudaStream_t stream) {
  check_shape("batchnorm_forward", batch, channels, spatial);
  const size_t count = static_cast<size_t>(batch) * static_cast<size_t>(channels) * static_cast<size_t>(spatial);
  if (count == 0) return;
  TANDEM_CHECK(x && mean && invstd && gamma && beta && xhat && y, "batchnorm_forward: a null pointer for ", batch,
               " x ", channels, " x ", spatial);
  const unsigned blocks = detail::blocks_for(count, static_cast<size_t>(kBlock) * kUnroll);
  if (detail::fits_32bit(count))
    batchnorm_forward_kernel<uint32_t><<<blocks, kBlock, 0, stream>>>(x, mean, invstd, gamma, beta, static_cast<uint32_t>(count),
                                                            static_cast<uint32_t>(spatial),
                                                            static_cast<uint32_t>(channels), xhat, y);
  else
    batchnorm_forward_kernel<uint64_t><<<blocks, kBlock, 0, stream>>>(x, mean, invstd, gamma, beta, static_cast<uint64_t>(count),
                                                            static_cast<uint64_t>(spatial),
                                                            static_cast<uint64_t>(channels), xhat, y);
  TANDEM_CUDA_CHECK_LAUNCH("batchnorm_forward", batch, " x ", channels, " x ", spatial);
}

void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                        const double* sums, double count, int batch, int channels, int spatial, float* dx,
                        cudaStream_t stream) {
  check_shape("batchnorm_backward", batch, channels, spatial);
  const size_t n = static_cast<size_t>(batch) * static_cast<size_t>(channels) * static_cast<size_t>(spatial);
  if (n == 0) return;
  TANDEM_CHECK(count > 0.0, "batchnorm_backward: the global count of values per channel is ", count,
               " for a local batch of ", batch, " x ", spatial);
  TANDEM_CHECK(dy && xhat && gamma && invstd && sums && dx, "batchnorm_backward: a null pointer for ", batch, " x ",
               channels, " x ", spatial);
  const unsigned blocks = detail::blocks_for(n, static_cast<size_t>(kBlock) * kUnroll);
  const double inv_count = 1.0 / count;
  if (detail::fits_32bit(n))
    batchnorm_backward_kernel<uint32_t><<<blocks, kBlock, 0, stream>>>(dy, xhat, gamma, invstd, sums, inv_count,
                                                             static_cast<uint32_t>(n), static_cast<uint32_t>(spatial),
                                                             static_cast<uint32_t>(channels), dx);
  else
    batchnorm_backward_kernel<uint64_t><<<blocks, kBlock, 0, stream>>>(dy, xhat, gamma, invstd, sums, inv_count,
                                                             static_cast<uint64_t>(n), static_cast<uint64_t>(spatial),
                                                             static_cast<uint64_t>(channels), dx);
  TANDEM_CUDA_CHECK_LAUNCH("batchnorm_backward", batch, " x ", channels, " x ", spatial, ", count ", count);
}

}  // namespace tandem::cuda
