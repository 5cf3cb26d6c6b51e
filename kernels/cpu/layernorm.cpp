#include "kernels/cpu/layernorm.hpp"

#include <cmath>
#include <cstddef>
#include <vector>

namespace tandem::cpu {

void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim, float eps, float* y,
                       float* mean, float* rstd) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * dim;
    double sum = 0.0;
    for (int c = 0; c < dim; ++c) sum += xr[c];
    const double mu = sum / dim;
    double var = 0.0;
    for (int c = 0; c < dim; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    const float rs = static_cast<float>(1.0 / std::sqrt(var / dim + eps));
    const float m = static_cast<float>(mu);
    float* yr = y + static_cast<size_t>(r) * dim;
    for (int c = 0; c < dim; ++c) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    mean[r] = m;
    rstd[r] = rs;
  }
}

void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        int rows, int dim, float* dx, float* dgamma, float* dbeta) {
  std::vector<double> dg(static_cast<size_t>(dim), 0.0), db(static_cast<size_t>(dim), 0.0);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * dim;
    const float* gr = dy + static_cast<size_t>(r) * dim;
    float* dxr = dx + static_cast<size_t>(r) * dim;
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma
    double g_mean = 0.0, gx_mean = 0.0;
    for (int c = 0; c < dim; ++c) {
      const double xhat = (xr[c] - mean[r]) * rstd[r];
      const double g = static_cast<double>(gr[c]) * gamma[c];
      g_mean += g;
      gx_mean += g * xhat;
      dg[c] += gr[c] * xhat;
      db[c] += gr[c];
    }
    g_mean /= dim;
    gx_mean /= dim;
    for (int c = 0; c < dim; ++c) {
      const double xhat = (xr[c] - mean[r]) * rstd[r];
      const double g = static_cast<double>(gr[c]) * gamma[c];
      dxr[c] = static_cast<float>(rstd[r] * (g - g_mean - xhat * gx_mean));
    }
  }
  for (int c = 0; c < dim; ++c) {
    dgamma[c] = static_cast<float>(dg[c]);
    dbeta[c] = static_cast<float>(db[c]);
  }
}

}  // namespace tandem::cpu
