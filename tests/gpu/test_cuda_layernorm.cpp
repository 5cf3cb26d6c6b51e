// Layer normalisation on the GPU (kernels/cuda/layernorm.cu) against
// kernels/cpu/layernorm.cpp (statistics in double): y, mean and rstd forward; dx,
// dgamma and dbeta backward (dgamma and dbeta start poisoned: they are overwritten,
// zeros for no rows). Rows 0, 1, a few, more than one split of the column sums (256
// rows) and a GPT's batch (16384 x 384); dims 1, odd, below and above a warp, not a
// multiple of 4; inputs centred on 0 and on 100 (where a one-pass variance loses
// digits). The column sums run twice to show they are deterministic (bitwise); dx in
// place of dy last.
#include <string>
#include <vector>

#include "kernels/cpu/layernorm.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/layernorm.cuh"

namespace {

using namespace tandem::gpu_test;

void check(int rows, int dim, float centre, double tol, cudaStream_t stream) {
  const std::string shape = std::to_string(rows) + " x " + std::to_string(dim) + ", x around " +
                            std::to_string(centre);
  const float eps = 1e-5f;
  const size_t n = static_cast<size_t>(rows) * dim, d = static_cast<size_t>(dim), r = static_cast<size_t>(rows);
  const std::vector<float> x = random_floats(n, 100, centre - 2.0f, centre + 2.0f),
                           gamma = random_floats(d, 101, 0.5f, 1.5f), beta = random_floats(d, 102),
                           dy = random_floats(n, 103);
  std::vector<float> want_y(n), want_mean(r), want_rstd(r), want_dx(n), want_dgamma(d), want_dbeta(d);
  tandem::cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), rows, dim, eps, want_y.data(), want_mean.data(),
                                 want_rstd.data());
  tandem::cpu::layernorm_backward(dy.data(), x.data(), gamma.data(), want_mean.data(), want_rstd.data(), rows, dim,
                                  want_dx.data(), want_dgamma.data(), want_dbeta.data());

  DeviceBuffer<float> d_x = upload(x), d_gamma = upload(gamma), d_beta = upload(beta), d_dy = upload(dy), d_y(n),
                      d_mean(r), d_rstd(r);
  poison(d_y);
  poison(d_mean);
  poison(d_rstd);
  tandem::cuda::layernorm_forward(at(d_x), at(d_gamma), at(d_beta), rows, dim, eps, at(d_y), at(d_mean), at(d_rstd),
                                  stream);
  sync(stream);
  GPU_CHECK_CLOSE("layernorm_forward", shape, "y", download(d_y), want_y, tol);
  GPU_CHECK_CLOSE("layernorm_forward", shape, "mean", download(d_mean), want_mean, tol);
  GPU_CHECK_CLOSE("layernorm_forward", shape, "rstd", download(d_rstd), want_rstd, tol);

  // Backward from the CPU's statistics, so both sides see the same input.
  DeviceBuffer<float> d_ref_mean = upload(want_mean), d_ref_rstd = upload(want_rstd), d_dx(n), d_dgamma(d),
                      d_dbeta(d);
  std::vector<float> first_dgamma, first_dbeta;
  for (int run = 0; run < 2; ++run) {
    poison(d_dx);
    poison(d_dgamma);
    poison(d_dbeta);
    tandem::cuda::layernorm_backward(at(d_dy), at(d_x), at(d_gamma), at(d_ref_mean), at(d_ref_rstd), rows, dim,
                                     at(d_dx), at(d_dgamma), at(d_dbeta), stream);
    sync(stream);
    const std::vector<float> dgamma = download(d_dgamma), dbeta = download(d_dbeta);
    if (run == 0) {
      GPU_CHECK_CLOSE("layernorm_backward", shape, "dx", download(d_dx), want_dx, tol);
      GPU_CHECK_CLOSE("layernorm_backward", shape, "dgamma", dgamma, want_dgamma, tol);
      GPU_CHECK_CLOSE("layernorm_backward", shape, "dbeta", dbeta, want_dbeta, tol);
      first_dgamma = dgamma;
      first_dbeta = dbeta;
    } else {
      GPU_CHECK("layernorm_backward", shape, "dgamma and dbeta bitwise the same on a second run",
                bitwise_equal(dgamma, first_dgamma) && bitwise_equal(dbeta, first_dbeta));
    }
  }

  // In place: dx over dy (the column sums must still see dy).
  poison(d_dgamma);
  poison(d_dbeta);
  tandem::cuda::layernorm_backward(at(d_dy), at(d_x), at(d_gamma), at(d_ref_mean), at(d_ref_rstd), rows, dim,
                                   at(d_dy), at(d_dgamma), at(d_dbeta), stream);
  sync(stream);
  GPU_CHECK_CLOSE("layernorm_backward", shape, "dx in place of dy", download(d_dy), want_dx, tol);
  GPU_CHECK("layernorm_backward", shape, "dgamma and dbeta unchanged by the in-place dx",
            bitwise_equal(download(d_dgamma), first_dgamma) && bitwise_equal(download(d_dbeta), first_dbeta));
}

}  // namespace

int main() {
  return tandem::gpu_test::run("layernorm", [](cudaStream_t stream) {
    const int shapes[][2] = {{0, 8}, {1, 1}, {1, 5}, {3, 7}, {7, 33}, {100, 384}, {300, 1000}, {1000, 37}};
    for (const auto& s : shapes) check(s[0], s[1], 0.0f, 1e-5, stream);
    for (const auto& s : shapes) check(s[0], s[1], 100.0f, 1e-4, stream);
    check(64 * 256, 384, 0.0f, 1e-5, stream);  // a GPT's batch
    GPU_CHECK_THROWS("layernorm_forward", "2 x 0", "dim 0",
                     tandem::cuda::layernorm_forward(nullptr, nullptr, nullptr, 2, 0, 1e-5f, nullptr, nullptr, nullptr,
                                                     stream));
    GPU_CHECK_THROWS("layernorm_backward", "2 x 4", "a null dgamma",
                     tandem::cuda::layernorm_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 2, 4, nullptr,
                                                      nullptr, nullptr, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
