#pragma once
// Bias gradients: column sums of dy (dense layers) and per-channel sums (conv layers).
namespace tandem::cpu {

void bias_grad(const float* dy, int rows, int cols, float* db);
void channel_bias_grad(const float* dy, int batch, int channels, int spatial, float* db);

}  // namespace tandem::cpu
