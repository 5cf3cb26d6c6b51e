// Global average pooling, [batch, channels, spatial] -> [batch, channels] and back.
//
// Forward is one mean per contiguous plane of `spatial` floats. Planes of 32 or more
// values get a warp each (lanes stride the plane, coalesced; a warp-uniform loop
// over planes, so xor shuffles with all lanes active add the lanes' double partial
// sums); shorter planes (spatial 1 after a dense layer, 2x2 or 4x4 maps) get a thread
// each, as a warp would leave most lanes idle. Backward broadcasts dy / spatial over
// each plane: an elementwise stream, a grid-stride loop with 4 loads in flight per
// thread, the plane index an integer division (32 bits below 2^31 elements).
#include "kernels/cuda/avgpool.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
using detail::kWarps;
using detail::kUnroll;
using detail::kFullMask;

__global__ void __launch_bounds__(kBlock) avgpool_forward_warp(const float* __restrict__ x, size_t planes,
                                                               int spatial, float* __restrict__ y) {
  const int lane = threadIdx.x % 32;
  const size_t stride = static_cast<size_t>(gridDim.x) * kWarps;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / 32; r < planes; r += stride) {
    const float* p = x + r * static_cast<size_t>(spatial);
    double s = 0.0;
    for (int i = lane; i < spatial; i += 32) s += p[i];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(kFullMask, s, offset);
    if (lane == 0) y[r] = static_cast<float>(s) / static_cast<float>(spatial);
  }
}

__global__ void __launch_bounds__(kBlock) avgpool_forward_thread(const float* __restrict__ x, size_t planes,
                                                                 int spatial, float* __restrict__ y) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  for (size_t r = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x; r < planes; r += stride) {
    const float* p = x + r * static_cast<size_t>(spatial);
    double s = 0.0;
    for (int i = 0; i < spatial; ++i) s += p[i];
    y[r] = static_cast<float>(s) / static_cast<float>(spatial);
  }
}

// dx[i] = dy[i / spatial] / spatial, the division as the CPU does it (IEEE, in float).
template <typename Index>
__global__ void __launch_bounds__(kBlock) avgpool_backward_kernel(const float* __restrict__ dy, Index count,
                                                                  Index spatial, float* __restrict__ dx) {
  const Index step = static_cast<Index>(gridDim.x) * (kBlock * kUnroll);
  const float denominator = static_cast<float>(spatial);
  for (Index base = static_cast<Index>(blockIdx.x) * (kBlock * kUnroll) + threadIdx.x; base < count; base += step) {
    float g[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      g[k] = i < count ? dy[i / spatial] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      if (i < count) dx[i] = g[k] / denominator;
    }
  }
}

}  // namespace

void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y, cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && channels >= 0 && spatial >= 0, "global_avgpool_forward: batch ", batch, ", channels ",
               channels, " and spatial ", spatial, " must not be negative");
  const size_t planes = static_cast<size_t>(batch) * static_cast<size_t>(channels);
  if (planes == 0) return;
  TANDEM_CHECK(spatial > 0, "global_avgpool_forward: the mean of an empty plane (", batch, " x ", channels,
               " x 0) is undefined");
  TANDEM_CHECK(x && y, "global_avgpool_forward: a null pointer for ", batch, " x ", channels, " x ", spatial);
  if (spatial >= 32)
    avgpool_forward_warp<<<detail::blocks_for(planes, kWarps), kBlock, 0, stream>>>(x, planes, spatial, y);
  else
    avgpool_forward_thread<<<detail::blocks_for(planes, kBlock), kBlock, 0, stream>>>(x, planes, spatial, y);
  TANDEM_CUDA_CHECK_LAUNCH("global_avgpool_forward", batch, " x ", channels, " x ", spatial);
}

void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx, cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && channels >= 0 && spatial >= 0, "global_avgpool_backward: batch ", batch,
               ", channels ", channels, " and spatial ", spatial, " must not be negative");
  const size_t count = static_cast<size_t>(batch) * static_cast<size_t>(channels) * static_cast<size_t>(spatial);
  if (count == 0) return;
  TANDEM_CHECK(dy && dx, "global_avgpool_backward: a null pointer for ", batch, " x ", channels, " x ", spatial);
  const unsigned blocks = detail::blocks_for(count, static_cast<size_t>(kBlock) * kUnroll);
  if (detail::fits_32bit(count))
    avgpool_backward_kernel<uint32_t><<<blocks, kBlock, 0, stream>>>(dy, static_cast<uint32_t>(count),
                                                                     static_cast<uint32_t>(spatial), dx);
  else
    avgpool_backward_kernel<uint64_t><<<blocks, kBlock, 0, stream>>>(dy, static_cast<uint64_t>(count),
                                                                     static_cast<uint64_t>(spatial), dx);
  TANDEM_CUDA_CHECK_LAUNCH("global_avgpool_backward", batch, " x ", channels, " x ", spatial);
}

}  // namespace tandem::cuda
