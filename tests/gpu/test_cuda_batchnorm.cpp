// Batch normalisation on the GPU (kernels/cuda/batchnorm.cu) against
// kernels/cpu/batchnorm.cpp, at each seam: the per-channel sums (doubles; bitwise the
// same on a second run; zeros for an empty batch), forward, the backward sums and
// backward with a global count larger than the local batch (as when the sums are
// added up over workers). Shapes: zero batch, zero spatial, one value, spatial 1
// (after a dense layer), one split and many, planes longer than a split, more than
// 2^24 values.
#include <string>
#include <vector>

#include "kernels/cpu/batchnorm.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/batchnorm.cuh"

namespace {

using namespace tandem::gpu_test;

void check(int batch, int channels, int spatial, cudaStream_t stream) {
  const std::string shape = std::to_string(batch) + " x " + std::to_string(channels) + " x " + std::to_string(spatial);
  const size_t count = static_cast<size_t>(batch) * channels * spatial, width = 2 * static_cast<size_t>(channels);
  const std::vector<float> x = random_floats(count, 80, -2.0f, 3.0f), dy = random_floats(count, 81);
  const std::vector<float> mean = random_floats(static_cast<size_t>(channels), 82),
                           invstd = random_floats(static_cast<size_t>(channels), 83, 0.5f, 2.0f),
                           gamma = random_floats(static_cast<size_t>(channels), 84),
                           beta = random_floats(static_cast<size_t>(channels), 85);
  const double global_count = 2.0 * static_cast<double>(batch) * spatial + 3.0;  // other workers' values too

  std::vector<double> want_sums(width), want_back_sums(width);
  std::vector<float> want_xhat(count), want_y(count), want_dx(count);
  tandem::cpu::batchnorm_sums(x.data(), batch, channels, spatial, want_sums.data());
  tandem::cpu::batchnorm_forward(x.data(), mean.data(), invstd.data(), gamma.data(), beta.data(), batch, channels,
                                 spatial, want_xhat.data(), want_y.data());
  tandem::cpu::batchnorm_backward_sums(dy.data(), want_xhat.data(), batch, channels, spatial, want_back_sums.data());
  tandem::cpu::batchnorm_backward(dy.data(), want_xhat.data(), gamma.data(), invstd.data(), want_back_sums.data(),
                                  global_count, batch, channels, spatial, want_dx.data());

  DeviceBuffer<float> d_x = upload(x), d_dy = upload(dy), d_mean = upload(mean), d_invstd = upload(invstd),
                      d_gamma = upload(gamma), d_beta = upload(beta), d_xhat(count), d_y(count), d_dx(count);
  DeviceBuffer<double> d_sums(width), d_back_sums(width);
  poison(d_sums);
  poison(d_back_sums);
  poison(d_xhat);
  poison(d_y);
  poison(d_dx);

  tandem::cuda::batchnorm_sums(at(d_x), batch, channels, spatial, at(d_sums), stream);
  tandem::cuda::batchnorm_forward(at(d_x), at(d_mean), at(d_invstd), at(d_gamma), at(d_beta), batch, channels, spatial,
                                  at(d_xhat), at(d_y), stream);
  sync(stream);
  const std::vector<double> sums = download(d_sums);
  const std::vector<float> xhat = download(d_xhat);
  GPU_CHECK_CLOSE("batchnorm_sums", shape, "sums", sums, want_sums, 1e-9);
  GPU_CHECK_CLOSE("batchnorm_forward", shape, "xhat", xhat, want_xhat, 1e-5);
  GPU_CHECK_CLOSE("batchnorm_forward", shape, "y", download(d_y), want_y, 1e-5);

  // Backward from the CPU's xhat, so the two seams are checked separately.
  DeviceBuffer<float> d_want_xhat = upload(want_xhat);
  tandem::cuda::batchnorm_backward_sums(at(d_dy), at(d_want_xhat), batch, channels, spatial, at(d_back_sums), stream);
  sync(stream);
  const std::vector<double> back_sums = download(d_back_sums);
  GPU_CHECK_CLOSE("batchnorm_backward_sums", shape, "sums", back_sums, want_back_sums, 1e-9);
  // batchnorm_backward reads the sums from the device: give it the CPU's.
  DeviceBuffer<double> d_cpu_sums = upload(want_back_sums);
  tandem::cuda::batchnorm_backward(at(d_dy), at(d_want_xhat), at(d_gamma), at(d_invstd), at(d_cpu_sums), global_count,
                                   batch, channels, spatial, at(d_dx), stream);
  sync(stream);
  GPU_CHECK_CLOSE("batchnorm_backward", shape, "dx", download(d_dx), want_dx, 1e-5);

  // Deterministic sums.
  poison(d_sums);
  poison(d_back_sums);
  tandem::cuda::batchnorm_sums(at(d_x), batch, channels, spatial, at(d_sums), stream);
  tandem::cuda::batchnorm_backward_sums(at(d_dy), at(d_want_xhat), batch, channels, spatial, at(d_back_sums), stream);
  sync(stream);
  GPU_CHECK("batchnorm_sums", shape, "a second run, bitwise", bitwise_equal(download(d_sums), sums));
  GPU_CHECK("batchnorm_backward_sums", shape, "a second run, bitwise", bitwise_equal(download(d_back_sums), back_sums));
}

}  // namespace

int main() {
  return tandem::gpu_test::run("batchnorm", [](cudaStream_t stream) {
    const int shapes[][3] = {{0, 3, 5},      {3, 4, 0},    {1, 1, 1},     {2, 3, 5},       {128, 16, 64},
                             {128, 16, 196}, {64, 256, 1}, {3, 2, 300000}, {1, 3, 8193},   {70000, 2, 3},
                             {130, 64, 2048}};
    for (const auto& s : shapes) check(s[0], s[1], s[2], stream);

    double sums[2];
    GPU_CHECK_THROWS("batchnorm_backward", "2 x 1 x 3, count 0", "a zero global count",
                     tandem::cuda::batchnorm_backward(nullptr, nullptr, nullptr, nullptr, sums, 0.0, 2, 1, 3, nullptr,
                                                      stream));
    GPU_CHECK_THROWS("batchnorm_sums", "2 x 1 x 3", "null sums",
                     tandem::cuda::batchnorm_sums(nullptr, 2, 1, 3, nullptr, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
