// The device-side batch gather. One block per batch row at a time (a grid-stride
// loop over rows): the block reads the 256-entry table into shared memory once, then
// its threads read the row's bytes four at a time where every row is 4-byte aligned
// and a multiple of 4 long (Fashion-MNIST's 784; a text's windows at a stride of 4)
// and write four floats, so a row is one coalesced read and one coalesced write.
// Labels: a row's first label_bytes threads widen its label bytes to int32.
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;

__global__ void __launch_bounds__(kBlock)
    gather_byte_rows_kernel(ByteRowTable t, const int64_t* __restrict__ indices, int64_t count,
                            float* __restrict__ x, int32_t* __restrict__ labels, bool vector) {
  __shared__ float lookup[256];
  lookup[threadIdx.x] = t.table[threadIdx.x];  // kBlock == 256: a thread per entry
  __syncthreads();
  // The table's rows are read-only here: say so, for the read-only data path.
  const uint8_t* __restrict__ samples = t.samples;
  const uint8_t* __restrict__ label_rows = t.labels;
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const int64_t s = indices[i];
    const uint8_t* src = samples + s * t.sample_stride;
    float* dst = x + i * t.sample_bytes;
    int64_t done = 0;
    if (vector) {
      const int64_t n4 = t.sample_bytes / 4;
      const uchar4* src4 = reinterpret_cast<const uchar4*>(src);
      float4* dst4 = reinterpret_cast<float4*>(dst);
      for (int64_t j = threadIdx.x; j < n4; j += kBlock) {
        const uchar4 b = src4[j];
        dst4[j] = make_float4(lookup[b.x], lookup[b.y], lookup[b.z], lookup[b.w]);
      }
      done = n4 * 4;
    }
    for (int64_t j = done + threadIdx.x; j < t.sample_bytes; j += kBlock) dst[j] = lookup[src[j]];
    const uint8_t* l = label_rows + s * t.label_stride;
    for (int64_t k = threadIdx.x; k < t.label_bytes; k += kBlock) labels[i * t.label_bytes + k] = l[k];
  }
}

}  // namespace

void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x, int32_t* labels,
                      cudaStream_t stream) {
  static_assert(kBlock == 256, "the table is loaded one entry per thread");
  TANDEM_CHECK(t.sample_bytes >= 0 && t.label_bytes >= 0 && count >= 0, "gather_byte_rows: negative size (sample ",
               t.sample_bytes, " bytes, label ", t.label_bytes, " bytes, ", count, " rows)");
  if (count == 0) return;
  TANDEM_CHECK(t.samples && t.table && indices && x && (t.label_bytes == 0 || (t.labels && labels)),
               "gather_byte_rows: a null pointer for ", count, " rows");
  // uchar4 loads need every row's start 4-byte aligned; float4 stores need x 16-byte
  // aligned at every row: sample_bytes % 4 == 0 keeps each row's start a multiple of
  // 16 bytes from x's.
  const bool vector = t.sample_bytes % 4 == 0 && t.sample_stride % 4 == 0 &&
                      reinterpret_cast<uintptr_t>(t.samples) % 4 == 0 && detail::aligned16(x);
  const unsigned blocks = detail::blocks_for(static_cast<size_t>(count), 1);
  gather_byte_rows_kernel<<<blocks, kBlock, 0, stream>>>(t, indices, count, x, labels, vector);
  TANDEM_CUDA_CHECK_LAUNCH("gather_byte_rows", count, " rows of ", t.sample_bytes, " bytes");
}

}  // namespace tandem::cuda
