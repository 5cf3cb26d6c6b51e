#pragma once
// Softmax cross-entropy, SUM over the rows, fused with its gradient
// (softmax - onehot): one pass over the logits instead of three.
#include <cstdint>

namespace tandem::cpu {

double softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                    int64_t* correct);

}  // namespace tandem::cpu
