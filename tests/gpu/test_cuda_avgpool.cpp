// Global average pooling on the GPU (kernels/cuda/avgpool.cu) against
// kernels/cpu/avgpool.cpp: planes shorter than a warp (thread per plane) and of 32
// or more (warp per plane), spatial 1, zero batch, long planes, more than 65535
// planes, more than 2^24 elements backward; an empty plane is refused.
#include <string>
#include <vector>

#include "kernels/cpu/avgpool.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/avgpool.cuh"

namespace {

using namespace tandem::gpu_test;

void check(int batch, int channels, int spatial, cudaStream_t stream) {
  const std::string shape = std::to_string(batch) + " x " + std::to_string(channels) + " x " + std::to_string(spatial);
  const size_t planes = static_cast<size_t>(batch) * channels, count = planes * spatial;
  const std::vector<float> x = random_floats(count, 50), dy = random_floats(planes, 51);
  std::vector<float> want_y(planes), want_dx(count);
  tandem::cpu::global_avgpool_forward(x.data(), batch, channels, spatial, want_y.data());
  tandem::cpu::global_avgpool_backward(dy.data(), batch, channels, spatial, want_dx.data());

  DeviceBuffer<float> d_x = upload(x), d_y(planes), d_dy = upload(dy), d_dx(count);
  poison(d_y);
  poison(d_dx);
  tandem::cuda::global_avgpool_forward(at(d_x), batch, channels, spatial, at(d_y), stream);
  tandem::cuda::global_avgpool_backward(at(d_dy), batch, channels, spatial, at(d_dx), stream);
  sync(stream);
  GPU_CHECK_CLOSE("global_avgpool_forward", shape, "y", download(d_y), want_y, 1e-5);
  GPU_CHECK_CLOSE("global_avgpool_backward", shape, "dx", download(d_dx), want_dx, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("avgpool", [](cudaStream_t stream) {
    const int shapes[][3] = {{0, 3, 4},     {2, 0, 4},      {1, 1, 1},    {2, 3, 5},       {4, 8, 31},
                             {4, 8, 32},    {4, 8, 33},     {128, 64, 64}, {128, 256, 1}, {3, 2, 100000},
                             {70000, 3, 1}, {70000, 1, 49}, {128, 256, 520}};
    for (const auto& s : shapes) check(s[0], s[1], s[2], stream);

    float x = 0.0f;
    GPU_CHECK_THROWS("global_avgpool_forward", "2 x 3 x 0", "the mean of an empty plane",
                     tandem::cuda::global_avgpool_forward(&x, 2, 3, 0, &x, stream));
    GPU_CHECK_THROWS("global_avgpool_backward", "2 x -3 x 4", "a negative channel count",
                     tandem::cuda::global_avgpool_backward(&x, 2, -3, 4, &x, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
