#pragma once
// The masked softmax of causal self-attention over square seq x seq score matrices:
// row i sees columns j <= i; the upper triangle of the output is zero and that of the
// input never read (engine/core/device.hpp states the formulas). The scale (1/sqrt
// of the head size) is folded in so the score GEMM needs no pass of its own.
#include <cstdint>

namespace tandem::cpu {

void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale);
void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq, float scale);

}  // namespace tandem::cpu
