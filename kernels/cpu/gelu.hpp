#pragma once
// GELU with the tanh approximation (GPT-2; torch's approximate='tanh'). Backward
// takes forward's input, so nothing but the input is kept.
#include <cstddef>

namespace tandem::cpu {

void gelu_forward(const float* x, float* y, size_t count);
void gelu_backward(const float* x, const float* dy, float* dx, size_t count);

}  // namespace tandem::cpu
