// Token + position embedding.
//
// Forward: one block of 128 threads per token position, striding over dim: two
// coalesced row reads (wte's row of the token, wpe's row of the position) and one
// write.
//
// Backward, dwpe: one thread per (position t, column c) adds dy[b, t, c] over b in
// order 0 .. batch-1 in float, as the CPU does: deterministic, and coalesced along c.
//
// Backward, dwte: one thread per (token v, column c) scans every position of the
// batch in order and adds the rows holding v, starting from dwte's value: the CPU's
// order of additions, so deterministic with no atomics. The tokens are staged through
// shared memory in tiles (decoded once per tile: -1 for a bad token), and the branch
// on "holds v" is uniform across the block (a block covers one v), so only the rows
// holding v are read. The cost is O(vocab x tokens) compares, fine for a byte-level
// vocabulary (256) and a batch of tens of thousands of tokens; a large vocabulary
// (50k) wants a sort of positions by token first.
#include <cmath>

#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/launch_check.cuh"

namespace tandem::cuda {

namespace {

constexpr int kRowBlock = 128;   // forward: threads per token row
constexpr int kTile = 256;       // dwte: tokens staged per tile, and threads per block
constexpr int kColBlock = 256;   // dwpe: threads per block

// The token id held by f, or -1 if f is not an integer in [0, vocab).
__device__ __forceinline__ int decode(float f, int vocab) {
  return (f >= 0.0f && f < static_cast<float>(vocab) && truncf(f) == f) ? static_cast<int>(f) : -1;
}

__global__ void __launch_bounds__(kRowBlock) embedding_forward_kernel(const float* __restrict__ tokens,
                                                            const float* __restrict__ wte,
                                                            const float* __restrict__ wpe, int seq, int dim,
                                                            int vocab, float* __restrict__ y) {
  const size_t row = blockIdx.x;  // b * seq + t
  const int t = static_cast<int>(row % static_cast<size_t>(seq));
  const int v = decode(tokens[row], vocab);
  float* out = y + row * dim;
  if (v < 0) {
    for (int c = threadIdx.x; c < dim; c += kRowBlock) out[c] = NAN;
    return;
  }
  const float* e = wte + static_cast<size_t>(v) * dim;
  const float* p = wpe + static_cast<size_t>(t) * dim;
  for (int c = threadIdx.x; c < dim; c += kRowBlock) out[c] = e[c] + p[c];
}

// One thread per (t, c) of dwpe: blockIdx.y = t, columns along x.
__global__ void __launch_bounds__(kColBlock) position_grad_kernel(const float* __restrict__ dy, int batch, int seq,
                                                                  int dim, float* __restrict__ dwpe) {
  const int c = blockIdx.x * kColBlock + threadIdx.x;
  const int t = blockIdx.y;
  if (c >= dim) return;
  const size_t batch_stride = static_cast<size_t>(seq) * dim;
  const float* g = dy + static_cast<size_t>(t) * dim + c;
  float acc = 0.0f;
  for (int b = 0; b < batch; ++b) acc += g[b * batch_stride];
  dwpe[static_cast<size_t>(t) * dim + c] = acc;
}

// One thread per (v, c) of dwte: blockIdx.y = v, columns along x.
__global__ void __launch_bounds__(kTile) token_grad_kernel(const float* __restrict__ tokens,
                                                           const float* __restrict__ dy, size_t positions, int dim,
                                                           int vocab, float* __restrict__ dwte) {
  __shared__ int tile[kTile];
  const int c = blockIdx.x * kTile + threadIdx.x;
  const int v = blockIdx.y;
  float acc = c < dim ? dwte[static_cast<size_t>(v) * dim + c] : 0.0f;
  for (size_t base = 0; base < positions; base += kTile) {
    __syncthreads();  // the previous tile is no longer read
    const size_t i = base + threadIdx.x;
    tile[threadIdx.x] = i < positions ? decode(tokens[i], vocab) : -1;
    __syncthreads();
    const int n = positions - base < static_cast<size_t>(kTile) ? static_cast<int>(positions - base) : kTile;
    if (c < dim)
      for (int k = 0; k < n; ++k)
        if (tile[k] == v) acc += dy[(base + k) * dim + c];
  }
  if (c < dim) dwte[static_cast<size_t>(v) * dim + c] = acc;
}

}  // namespace

void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq, int dim, int vocab,
                       float* y, cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && seq >= 0 && dim >= 0 && vocab > 0, "embedding_forward: batch ", batch, ", seq ", seq,
               ", dim ", dim, " must not be negative and vocab ", vocab, " must be positive");
  const size_t positions = static_cast<size_t>(batch) * seq;
  if (positions == 0 || dim == 0) return;
  TANDEM_CHECK(tokens && wte && wpe && y, "embedding_forward: a null pointer for ", batch, " x ", seq, " x ", dim);
  TANDEM_CHECK(positions <= 0x7fffffffu, "embedding_forward: ", positions, " positions are more than one grid holds");
  embedding_forward_kernel<<<static_cast<unsigned>(positions), kRowBlock, 0, stream>>>(tokens, wte, wpe, seq, dim, vocab, y);
  TANDEM_CUDA_CHECK_LAUNCH("embedding_forward", batch, " x ", seq, " x ", dim, ", vocab ", vocab);
}

void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab, float* dwte,
                        float* dwpe, cudaStream_t stream) {
  TANDEM_CHECK(batch >= 0 && seq >= 0 && dim >= 0 && vocab > 0, "embedding_backward: batch ", batch, ", seq ", seq,
               ", dim ", dim, " must not be negative and vocab ", vocab, " must be positive");
  if (seq == 0 || dim == 0) return;
  TANDEM_CHECK(dwpe, "embedding_backward: dwpe is null for ", seq, " x ", dim);
  TANDEM_CHECK(seq <= 65535 && vocab <= 65535, "embedding_backward: seq ", seq, " or vocab ", vocab,
               " is more than a grid's second dimension (65535) holds");
  const size_t positions = static_cast<size_t>(batch) * seq;
  // dwpe is overwritten even for an empty batch (its rows become 0), as on the CPU.
  TANDEM_CHECK(positions == 0 || dy, "embedding_backward: dy is null for ", batch, " x ", seq, " x ", dim);
  const unsigned col_blocks = static_cast<unsigned>((dim + kColBlock - 1) / kColBlock);
  position_grad_kernel<<<dim3(col_blocks, static_cast<unsigned>(seq)), kColBlock, 0, stream>>>(dy, batch, seq, dim,
                                                                                             dwpe);
  TANDEM_CUDA_CHECK_LAUNCH("embedding_backward (positions)", batch, " x ", seq, " x ", dim);
  if (positions == 0) return;  // no token gradient to add
  TANDEM_CHECK(tokens && dwte, "embedding_backward: tokens or dwte is null for ", batch, " x ", seq, " x ", dim);
  const unsigned tile_blocks = static_cast<unsigned>((dim + kTile - 1) / kTile);
  token_grad_kernel<<<dim3(tile_blocks, static_cast<unsigned>(vocab)), kTile, 0, stream>>>(tokens, dy, positions, dim,
                                                                                           vocab, dwte);
  TANDEM_CUDA_CHECK_LAUNCH("embedding_backward (tokens)", batch, " x ", seq, " x ", dim, ", vocab ", vocab);
}

}  // namespace tandem::cuda
