#pragma once
// Between attention's sequence layout [batch, seq, parts, heads, head_dim] and its
// per-head layout [parts, batch, heads, seq, head_dim], in which each head's q, k
// and v are contiguous seq x head_dim matrices for the batched GEMMs.
namespace tandem::cpu {

void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads, int head_dim,
                   bool to_heads);

}  // namespace tandem::cpu
