#pragma once
// Softmax cross-entropy, SUM over the rows, fused with its gradient
// (softmax - onehot): one pass over the logits instead of three.
// A row is `ld` floats apart (0: `classes`), of which the first `classes` are the
// predicted ones: a vocabulary padded for speed (50257 to 50304, as llm.c pads) has
// its padded columns never predicted, never counted, and their gradient 0.
#include <cstdint>

namespace tandem::cpu {

double softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                    int64_t* correct, int ld = 0);

}  // namespace tandem::cpu
