#pragma once
// Global average pooling over [batch, channels, spatial] -> [batch, channels].
namespace tandem::cpu {

void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y);
// dx[n, c, i] = dy[n, c] / spatial
void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx);

}  // namespace tandem::cpu
