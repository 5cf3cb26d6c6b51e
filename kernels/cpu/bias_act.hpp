#pragma once
// Bias add fused with an activation, and the activation's backward from its output.
// Fusing saves one pass over the activations, which at small batches is a visible
// share of the step.
#include <cstddef>

#include "kernels/activation.hpp"

namespace tandem::cpu {

void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act);
void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial, Activation act);
void act_backward(const float* y, float* dy, size_t count, Activation act);

}  // namespace tandem::cpu
