#pragma once
// Batch normalisation over [batch, channels, spatial] (spatial = 1 after a linear
// layer). The per-channel sums are split from the normalisation so that the sums
// can be added up over every worker's share of the global batch in between: the
// statistics are then those of the whole batch, however it is split.
#include <cstddef>

namespace tandem::cpu {

// sums[c] = sum of x over batch and spatial, sums[channels + c] = sum of x^2.
void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums);
// xhat = (x - mean) * invstd, y = gamma * xhat + beta, per channel.
void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma, const float* beta,
                       int batch, int channels, int spatial, float* xhat, float* y);
// sums[c] = sum of dy, sums[channels + c] = sum of dy * xhat.
void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial, double* sums);
// dx = gamma * invstd * (dy - (sum_dy + xhat * sum_dy_xhat) / count), count being
// the number of values per channel over the whole (global) batch.
void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                        const double* sums, double count, int batch, int channels, int spatial, float* dx);

}  // namespace tandem::cpu
