// Byte-to-float normalisation on the GPU (kernels/cuda/normalize.cu) against the
// host's x * scale + shift (engine/core/device.cpp, Device::upload_normalized): every
// byte value, counts with a tail after the uchar4 loop, a byte buffer one byte off
// alignment and a float buffer one float off, and a Fashion-MNIST-sized epoch of
// 60000 x 784 pixels (more than 2^24).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/normalize.cuh"

namespace {

using namespace tandem::gpu_test;

void check(size_t count, size_t x_offset, size_t y_offset, cudaStream_t stream) {
  const std::string shape = std::to_string(count) + " bytes, offsets " + std::to_string(x_offset) + "/" +
                            std::to_string(y_offset);
  const float mean = 0.2860f, stddev = 0.3530f;  // Fashion-MNIST's
  const float scale = 1.0f / (255.0f * stddev), shift = -mean / stddev;
  std::mt19937 rng(70);
  std::vector<uint8_t> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<uint8_t>(i < 256 ? i : rng() & 0xff);
  std::vector<float> want(count);
  for (size_t i = 0; i < count; ++i) want[i] = static_cast<float>(x[i]) * scale + shift;

  DeviceBuffer<uint8_t> d_x = upload(x, x_offset);
  DeviceBuffer<float> d_y(count + y_offset);
  poison(d_y);
  tandem::cuda::normalize_u8(at(d_x, x_offset), at(d_y, y_offset), count, scale, shift, stream);
  sync(stream);
  GPU_CHECK_CLOSE("normalize_u8", shape, "y", download(d_y, y_offset), want, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("normalize", [](cudaStream_t stream) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{256}, size_t{1027}})
      for (size_t x_offset : {size_t{0}, size_t{1}})
        for (size_t y_offset : {size_t{0}, size_t{1}}) check(count, x_offset, y_offset, stream);
    check(size_t{60000} * 784, 0, 0, stream);
    check(size_t{60000} * 784 + 3, 1, 1, stream);
    GPU_CHECK_THROWS("normalize_u8", "3 bytes", "a null x",
                     tandem::cuda::normalize_u8(nullptr, nullptr, 3, 1.0f, 0.0f, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
