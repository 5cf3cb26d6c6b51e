// The head permutation is a copy with an index map, so one thread per element of the
// head layout in a grid-stride loop: consecutive threads walk one head's row of
// head_dim contiguous floats on both sides, so reads and writes are coalesced in runs
// of head_dim. The index is split into (part, batch, head, position, column) by
// div/mod in 64 bits (a GPT's activations can pass 2^31 floats at large batches).
#include "kernels/cuda/heads_permute.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

using detail::kBlock;

template <bool ToHeads>
__global__ void __launch_bounds__(kBlock) permute_kernel(float* __restrict__ seq_layout,
                                                         float* __restrict__ head_layout, size_t count, int batch,
                                                         int seq, int parts, int heads, int head_dim) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kBlock;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kBlock + threadIdx.x; i < count; i += stride) {
    // i = (((p * batch + b) * heads + h) * seq + t) * head_dim + d
    size_t r = i;
    const size_t d = r % head_dim;
    r /= head_dim;
    const size_t t = r % seq;
    r /= seq;
    const size_t h = r % heads;
    r /= heads;
    const size_t b = r % batch;
    const size_t p = r / batch;
    const size_t s = (((b * seq + t) * parts + p) * heads + h) * head_dim + d;
    if (ToHeads)
      head_layout[i] = seq_layout[s];
    else
      seq_layout[s] = head_layout[i];
  }
}

}  // namespace

void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads, int head_dim,
                   bool to_heads, cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && seq >= 0 && parts >= 0 && heads >= 0 && head_dim >= 0, "heads_permute: batch ", batch,
               ", seq ", seq, ", parts ", parts, ", heads ", heads, ", head_dim ", head_dim,
               " must not be negative");
  const size_t count = static_cast<size_t>(batch) * seq * parts * heads * head_dim;
  if (count == 0) return;
  TANDEM_CHECK(seq_layout && head_layout, "heads_permute: a null pointer for ", count, " elements");
  const float* s0 = seq_layout;
  const float* h0 = head_layout;
  TANDEM_CHECK(s0 + count <= h0 || h0 + count <= s0, "heads_permute: the two layouts overlap (", count,
               " elements); a permutation cannot run in place");
  const unsigned blocks = detail::blocks_for(count, kBlock);
  if (to_heads)
    permute_kernel<true><<<blocks, kBlock, 0, stream>>>(seq_layout, head_layout, count, batch, seq, parts, heads,
                                                        head_dim);
  else
    permute_kernel<false><<<blocks, kBlock, 0, stream>>>(seq_layout, head_layout, count, batch, seq, parts, heads,
                                                         head_dim);
  TANDEM_CUDA_CHECK_LAUNCH("heads_permute", batch, " x ", seq, " x ", parts, " x ", heads, " x ", head_dim,
                           to_heads ? ", to heads" : ", to sequence");
}

}  // namespace tandem::cuda
