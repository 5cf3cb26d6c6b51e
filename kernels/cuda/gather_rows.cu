// The device-side batch gather. One block per batch row at a time (a grid-stride
// loop over rows): the block reads the 256-entry table into shared memory once, then
// its threads read the row's bytes four at a time where the row is 4-byte aligned
// (sample_bytes % 4 == 0: Fashion-MNIST's 784) and write four floats, so a row is
// one coalesced read and one coalesced write. Labels: a row's first label_bytes
// threads widen its label bytes to int32.
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;

__global__ void __launch_bounds__(kBlock)
    gather_byte_rows_kernel(const uint8_t* __restrict__ samples, int64_t sample_bytes,
                            const uint8_t* __restrict__ label_rows, int64_t label_bytes,
                            const float* __restrict__ table, const int64_t* __restrict__ indices, int64_t count,
                            float* __restrict__ x, int32_t* __restrict__ labels, bool vector) {
  __shared__ float lookup[256];
  lookup[threadIdx.x] = table[threadIdx.x];  // kBlock == 256: a thread per entry
  __syncthreads();
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const int64_t s = indices[i];
    const uint8_t* src = samples + s * sample_bytes;
    float* dst = x + i * sample_bytes;
    int64_t done = 0;
    if (vector) {
      const int64_t n4 = sample_bytes / 4;
      const uchar4* src4 = reinterpret_cast<const uchar4*>(src);
      float4* dst4 = reinterpret_cast<float4*>(dst);
      for (int64_t j = threadIdx.x; j < n4; j += kBlock) {
        const uchar4 b = src4[j];
        dst4[j] = make_float4(lookup[b.x], lookup[b.y], lookup[b.z], lookup[b.w]);
      }
      done = n4 * 4;
    }
    for (int64_t j = done + threadIdx.x; j < sample_bytes; j += kBlock) dst[j] = lookup[src[j]];
    for (int64_t k = threadIdx.x; k < label_bytes; k += kBlock)
      labels[i * label_bytes + k] = label_rows[s * label_bytes + k];
  }
}

}  // namespace

void gather_byte_rows(const uint8_t* samples, int64_t sample_bytes, const uint8_t* label_rows, int64_t label_bytes,
                      const float* table, const int64_t* indices, int64_t count, float* x, int32_t* labels,
                      cudaStream_t stream) {
  static_assert(kBlock == 256, "the table is loaded one entry per thread");
  TANDEM_CHECK(sample_bytes >= 0 && label_bytes >= 0 && count >= 0, "gather_byte_rows: negative size (sample ",
               sample_bytes, " bytes, label ", label_bytes, " bytes, ", count, " rows)");
  if (count == 0) return;
  TANDEM_CHECK(samples && table && indices && x && (label_bytes == 0 || (label_rows && labels)),
               "gather_byte_rows: a null pointer for ", count, " rows");
  // float4 stores need x 16-byte aligned at every row: sample_bytes % 4 == 0 keeps
  // each row's start a multiple of 16 bytes from x's.
  const bool vector = sample_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(samples) % 4 == 0 && detail::aligned16(x);
  const unsigned blocks = detail::blocks_for(static_cast<size_t>(count), 1);
  gather_byte_rows_kernel<<<blocks, kBlock, 0, stream>>>(samples, sample_bytes, label_rows, label_bytes, table,
                                                         indices, count, x, labels, vector);
  TANDEM_CUDA_CHECK_LAUNCH("gather_byte_rows", count, " rows of ", sample_bytes, " bytes");
}

}  // namespace tandem::cuda
