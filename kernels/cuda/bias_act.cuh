#pragma once
// Bias add fused with an activation, forward, and the activation's backward from its
// output (kernels/cpu/bias_act.hpp is the reference). Launchers check their shapes,
// launch on `stream` and check the launch; they never synchronise.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/activation.hpp"

namespace tandem::cuda {

void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act, cudaStream_t stream);
void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial, Activation act,
                              cudaStream_t stream);
void act_backward(const float* y, float* dy, size_t count, Activation act, cudaStream_t stream);

}  // namespace tandem::cuda
