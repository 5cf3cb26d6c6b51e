#pragma once
// Token + learned position embedding of a GPT (kernels/cpu/embedding.hpp; the
// contract is in engine/core/device.hpp): tokens [batch, seq] as floats holding
// integers, wte [vocab, dim], wpe [>= seq, dim], y and dy [batch, seq, dim].
//
// Backward ACCUMULATES into dwte (dwte[v] += the gradient of every position holding
// v) and OVERWRITES rows 0 .. seq-1 of dwpe (the sum over the batch). Both are
// deterministic (no atomics): bitwise the same on every run.
//
// A token that is not an integer in [0, vocab) cannot be reported from the device (the
// data loader checks tokens on the host first): forward writes NaN over that
// position's whole row of y, so the loss turns NaN and the error cannot pass unseen,
// and backward gives that position no token gradient (its position gradient counts).
#include <cuda_runtime_api.h>

namespace tandem::cuda {

void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq, int dim, int vocab,
                       float* y, cudaStream_t stream);
void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab, float* dwte,
                        float* dwpe, cudaStream_t stream);

}  // namespace tandem::cuda
