// GELU (tanh approximation) on the GPU (kernels/cuda/gelu.cu) against
// kernels/cpu/gelu.cpp: forward and backward, counts 0, 1 and odd ones, buffers one
// float off 16-byte alignment, more than 2^24 elements, inputs far into both tails
// (where tanh saturates), forward in place (y = x) and backward in place (dx = dy).
#include <string>
#include <vector>

#include "kernels/cpu/gelu.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/gelu.cuh"

namespace {

using namespace tandem::gpu_test;

void check(size_t count, size_t offset, float range, cudaStream_t stream) {
  const std::string shape = std::to_string(count) + " elements, offset " + std::to_string(offset) + ", x in +-" +
                            std::to_string(range);
  const std::vector<float> x = random_floats(count, 50, -range, range), dy = random_floats(count, 51, -2.0f, 2.0f);
  std::vector<float> want_y(count), want_dx(count);
  tandem::cpu::gelu_forward(x.data(), want_y.data(), count);
  tandem::cpu::gelu_backward(x.data(), dy.data(), want_dx.data(), count);

  DeviceBuffer<float> d_x = upload(x, offset), d_dy = upload(dy, offset), d_out(count + offset);
  poison(d_out);
  tandem::cuda::gelu_forward(at(d_x, offset), at(d_out, offset), count, stream);
  sync(stream);
  GPU_CHECK_CLOSE("gelu_forward", shape, "y", download(d_out, offset), want_y, 1e-5);

  poison(d_out);
  tandem::cuda::gelu_backward(at(d_x, offset), at(d_dy, offset), at(d_out, offset), count, stream);
  sync(stream);
  GPU_CHECK_CLOSE("gelu_backward", shape, "dx", download(d_out, offset), want_dx, 1e-5);

  tandem::cuda::gelu_backward(at(d_x, offset), at(d_dy, offset), at(d_dy, offset), count, stream);  // dx = dy
  sync(stream);
  GPU_CHECK_CLOSE("gelu_backward", shape, "dx in place of dy", download(d_dy, offset), want_dx, 1e-5);

  tandem::cuda::gelu_forward(at(d_x, offset), at(d_x, offset), count, stream);  // y = x
  sync(stream);
  GPU_CHECK_CLOSE("gelu_forward", shape, "y in place of x", download(d_x, offset), want_y, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("gelu", [](cudaStream_t stream) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1027}, size_t{64 * 256 * 1536 / 64}})
      for (size_t offset : {size_t{0}, size_t{1}})
        for (float range : {3.0f, 12.0f}) check(count, offset, range, stream);
    check((size_t{1} << 24) + 5, 1, 4.0f, stream);
    GPU_CHECK_THROWS("gelu_forward", "4 elements", "a null pointer",
                     tandem::cuda::gelu_forward(nullptr, nullptr, 4, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
