// fill, add and add_relu on the GPU (kernels/cuda/elementwise.cu) against the CPU
// device's (engine/core/cpu_device.cpp): counts with a float4 tail, buffers one float
// off 16-byte alignment, more than 2^24 elements, and y aliasing a (in place).
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/elementwise.cuh"

namespace {

using namespace tandem::gpu_test;

void check_fill(size_t count, size_t offset, float value, cudaStream_t stream) {
  const std::string shape = std::to_string(count) + " elements, offset " + std::to_string(offset) + ", value " +
                            std::to_string(value);
  std::vector<float> want(count);
  if (count) tandem::cpu_device().fill(want.data(), count, value);  // (its memset wants a non-null pointer)
  DeviceBuffer<float> d_y(count + offset);
  poison(d_y);
  tandem::cuda::fill(at(d_y, offset), count, value, stream);
  sync(stream);
  GPU_CHECK_CLOSE("fill", shape, "y", download(d_y, offset), want, 1e-5);
}

void check_add(size_t count, size_t offset, bool relu, cudaStream_t stream) {
  const char* op = relu ? "add_relu" : "add";
  const std::string shape = std::to_string(count) + " elements, offset " + std::to_string(offset);
  const std::vector<float> a = random_floats(count, 60), b = random_floats(count, 61);
  std::vector<float> want(count);
  if (relu)
    tandem::cpu_device().add_relu(a.data(), b.data(), want.data(), count);
  else
    tandem::cpu_device().add(a.data(), b.data(), want.data(), count);

  DeviceBuffer<float> d_a = upload(a, offset), d_b = upload(b, offset), d_y(count + offset);
  poison(d_y);
  if (relu)
    tandem::cuda::add_relu(at(d_a, offset), at(d_b, offset), at(d_y, offset), count, stream);
  else
    tandem::cuda::add(at(d_a, offset), at(d_b, offset), at(d_y, offset), count, stream);
  sync(stream);
  GPU_CHECK_CLOSE(op, shape, "y", download(d_y, offset), want, 1e-5);

  // In place: y is a.
  if (relu)
    tandem::cuda::add_relu(at(d_a, offset), at(d_b, offset), at(d_a, offset), count, stream);
  else
    tandem::cuda::add(at(d_a, offset), at(d_b, offset), at(d_a, offset), count, stream);
  sync(stream);
  GPU_CHECK_CLOSE(op, shape, "y in place of a", download(d_a, offset), want, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("elementwise", [](cudaStream_t stream) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{1027}, (size_t{1} << 24) + 5})
      for (size_t offset : {size_t{0}, size_t{1}}) {
        for (float value : {0.0f, 1.5f, -2.25f}) check_fill(count, offset, value, stream);
        check_add(count, offset, false, stream);
        check_add(count, offset, true, stream);
      }
    float x = 0.0f;
    GPU_CHECK_THROWS("add", "3 elements", "a null b", tandem::cuda::add(&x, nullptr, &x, 3, stream));
    GPU_CHECK_THROWS("fill", "3 elements", "a null y", tandem::cuda::fill(nullptr, 3, 1.0f, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
