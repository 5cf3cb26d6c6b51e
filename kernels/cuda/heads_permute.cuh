#pragma once
// Between attention's sequence layout [batch, seq, parts, heads, head_dim] and its
// per-head layout [parts, batch, heads, seq, head_dim] (kernels/cpu/heads_permute.hpp).
// to_heads: head_layout = permute(seq_layout); otherwise seq_layout = the inverse.
// The two buffers must not overlap (a permutation cannot run in place).
#include <cuda_runtime_api.h>

namespace tandem::cuda {

void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads, int head_dim,
                   bool to_heads, cudaStream_t stream);

}  // namespace tandem::cuda
