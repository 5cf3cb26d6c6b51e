// Bias gradients on the GPU (kernels/cuda/bias_grad.cu) against
// kernels/cpu/bias_grad.cpp: zero rows (db must be overwritten with zeros), one row,
// one column, a partial column tile, the one-split and the two-pass shapes, more than
// 65535 rows, more than 2^24 values, planes longer than a split. Each result is
// computed twice and must be bitwise the same (the reductions are deterministic).
#include <string>
#include <vector>

#include "kernels/cpu/bias_grad.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/bias_grad.cuh"

namespace {

using namespace tandem::gpu_test;

void check_dense(int rows, int cols, cudaStream_t stream) {
  const std::string shape = std::to_string(rows) + " x " + std::to_string(cols);
  const std::vector<float> dy = random_floats(static_cast<size_t>(rows) * cols, 20);
  std::vector<float> want(static_cast<size_t>(cols));
  tandem::cpu::bias_grad(dy.data(), rows, cols, want.data());
  DeviceBuffer<float> d_dy = upload(dy), d_db(static_cast<size_t>(cols));
  poison(d_db);
  tandem::cuda::bias_grad(at(d_dy), rows, cols, at(d_db), stream);
  sync(stream);
  const std::vector<float> first = download(d_db);
  GPU_CHECK_CLOSE("bias_grad", shape, "db", first, want, 1e-4);
  poison(d_db);
  tandem::cuda::bias_grad(at(d_dy), rows, cols, at(d_db), stream);
  sync(stream);
  GPU_CHECK("bias_grad", shape, "a second run", bitwise_equal(download(d_db), first));
}

void check_channel(int batch, int channels, int spatial, cudaStream_t stream) {
  const std::string shape = std::to_string(batch) + " x " + std::to_string(channels) + " x " + std::to_string(spatial);
  const std::vector<float> dy = random_floats(static_cast<size_t>(batch) * channels * spatial, 21);
  std::vector<float> want(static_cast<size_t>(channels));
  tandem::cpu::channel_bias_grad(dy.data(), batch, channels, spatial, want.data());
  DeviceBuffer<float> d_dy = upload(dy), d_db(static_cast<size_t>(channels));
  poison(d_db);
  tandem::cuda::channel_bias_grad(at(d_dy), batch, channels, spatial, at(d_db), stream);
  sync(stream);
  const std::vector<float> first = download(d_db);
  GPU_CHECK_CLOSE("channel_bias_grad", shape, "db", first, want, 1e-4);
  poison(d_db);
  tandem::cuda::channel_bias_grad(at(d_dy), batch, channels, spatial, at(d_db), stream);
  sync(stream);
  GPU_CHECK("channel_bias_grad", shape, "a second run", bitwise_equal(download(d_db), first));
}

}  // namespace

int main() {
  return tandem::gpu_test::run("bias_grad", [](cudaStream_t stream) {
    // rows <= 256 is one split; 257 the smallest two-pass shape.
    const int dense[][2] = {{0, 5},    {1, 1},     {1, 40},    {37, 10},    {256, 100},  {257, 100},
                            {1000, 1000}, {4096, 10}, {70000, 33}, {300000, 64}, {3, 100000}};
    for (const auto& s : dense) check_dense(s[0], s[1], stream);

    // values per channel <= 8192 is one split.
    const int channel[][3] = {{0, 3, 5},     {3, 4, 0},     {1, 1, 1},       {2, 3, 5},
                              {128, 16, 64}, {128, 16, 196}, {64, 256, 1},   {3, 2, 300000},
                              {1, 3, 8193},  {130, 64, 2048}, {70000, 2, 3}};
    for (const auto& s : channel) check_channel(s[0], s[1], s[2], stream);

    float x = 0.0f;
    GPU_CHECK_THROWS("bias_grad", "-2 x 3", "a negative row count",
                     tandem::cuda::bias_grad(&x, -2, 3, &x, stream));
    GPU_CHECK_THROWS("bias_grad", "2 x 3", "a null db", tandem::cuda::bias_grad(&x, 2, 3, nullptr, stream));
    GPU_CHECK_THROWS("channel_bias_grad", "2 x 3 x 4", "a null dy",
                     tandem::cuda::channel_bias_grad(nullptr, 2, 3, 4, &x, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
