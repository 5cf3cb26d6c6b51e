// Inverted dropout with the counter-based mask of kernels/cpu/dropout.hpp. Forward
// and backward are the same map (multiply by mask / (1 - p)), so one kernel serves
// both. An element's mask is a hash of (seed, global row, column): nothing to store,
// nothing shared between threads, so the shape is a grid-stride loop over the
// elements in which each thread issues 4 coalesced loads (one block apart) before
// hashing, to keep loads in flight while the 64-bit multiplies run. (row, column) is
// an integer div/mod, in 32 bits below 2^31 elements.
//
// The mask must be bitwise the CPU's: the same hash (below), the same scale computed
// on the host in float, and `keep ? x * scale : 0` with one rounding, as on the CPU.
// tests/gpu/test_cuda_dropout.cpp compares the outputs bit for bit.
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;
using detail::kUnroll;

// MUST stay identical to tandem::cpu::hash_uniform in kernels/cpu/dropout.hpp (a
// copy, because kernels/cpu is plain C++ and stays free of CUDA annotations).
// Uniform in [0, 1) from a 64-bit key (splitmix64 finalizer).
__host__ __device__ __forceinline__ float hash_uniform(uint64_t key) {
  key += 0x9e3779b97f4a7c15ULL;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
  key ^= key >> 31;
  return static_cast<float>(key >> 40) * (1.0f / 16777216.0f);
}

// in and out may be the same buffer: each element is read and written by one thread.
// With `from` set, the key is mixed from the iteration's seed in device memory (each
// thread mixes it: two splitmix rounds, nothing beside the loads), else `seed` is it.
template <typename Index>
__global__ void __launch_bounds__(kBlock) dropout_kernel(const float* in, float* out, Index count, Index cols,
                                                         float p, float scale, uint64_t seed, int64_t first_row,
                                                         DropoutSeed from) {
  if (from.on_device) seed = dropout_key(seed_of_halves(from.on_device), from);
  const Index step = static_cast<Index>(gridDim.x) * (kBlock * kUnroll);
  for (Index base = static_cast<Index>(blockIdx.x) * (kBlock * kUnroll) + threadIdx.x; base < count; base += step) {
    float v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      v[k] = i < count ? in[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const Index i = base + static_cast<Index>(k * kBlock);
      if (i < count) {
        const Index r = i / cols, c = i - r * cols;
        const uint64_t row_key =
            seed ^ (static_cast<uint64_t>(first_row + static_cast<int64_t>(r)) * 0xd1b54a32d192ed03ULL);
        out[i] = hash_uniform(row_key + static_cast<uint64_t>(c)) >= p ? v[k] * scale : 0.0f;
      }
    }
  }
}

void apply_mask(const char* op, const float* in, float* out, int rows, int cols, float p, uint64_t seed,
                int64_t first_row, const DropoutSeed& from, cudaStream_t stream) {
  TANDEM_CHECK(rows >= 0 && cols >= 0, op, ": rows ", rows, " and cols ", cols, " must not be negative");
  TANDEM_CHECK(p >= 0.0f && p <= 1.0f, op, ": the drop probability ", p, " is outside [0, 1]");
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (count == 0) return;
  TANDEM_CHECK(in && out, op, ": a null pointer for ", rows, " x ", cols);
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;  // as the CPU computes it
  const unsigned blocks = detail::blocks_for(count, static_cast<size_t>(kBlock) * kUnroll);
  if (detail::fits_32bit(count))
    dropout_kernel<uint32_t><<<blocks, kBlock, 0, stream>>>(in, out, static_cast<uint32_t>(count),
                                                            static_cast<uint32_t>(cols), p, scale, seed, first_row,
                                                            from);
  else
    dropout_kernel<uint64_t><<<blocks, kBlock, 0, stream>>>(in, out, static_cast<uint64_t>(count),
                                                            static_cast<uint64_t>(cols), p, scale, seed, first_row,
                                                            from);
  TANDEM_CUDA_CHECK_LAUNCH(op, rows, " x ", cols, ", p ", p, ", first row ", first_row);
}

}  // namespace

void dropout_forward(const float* x, float* y, int rows, int cols, float p, uint64_t seed, int64_t first_row,
                     cudaStream_t stream) {
  apply_mask("dropout_forward", x, y, rows, cols, p, seed, first_row, DropoutSeed{}, stream);
}

void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, uint64_t seed, int64_t first_row,
                      cudaStream_t stream) {
  apply_mask("dropout_backward", dy, dx, rows, cols, p, seed, first_row, DropoutSeed{}, stream);
}

void dropout_forward(const float* x, float* y, int rows, int cols, float p, const DropoutSeed& seed,
                     int64_t first_row, cudaStream_t stream) {
  TANDEM_CHECK(seed.on_device, "dropout_forward: no seed in device memory (a bug in tandem)");
  apply_mask("dropout_forward", x, y, rows, cols, p, 0, first_row, seed, stream);
}

void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, const DropoutSeed& seed,
                      int64_t first_row, cudaStream_t stream) {
  TANDEM_CHECK(seed.on_device, "dropout_backward: no seed in device memory (a bug in tandem)");
  apply_mask("dropout_backward", dy, dx, rows, cols, p, 0, first_row, seed, stream);
}

}  // namespace tandem::cuda
