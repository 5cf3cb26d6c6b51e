// Dropout on the GPU (kernels/cuda/dropout.cu) against kernels/cpu/dropout.cpp, bit
// for bit: the GPU copies the CPU's hash, so a sample gets the same mask on either
// device, which is what lets workers on different devices share a global batch.
// Probabilities 0, 0.1, 0.5 and 1; first rows 0, large and negative; zero rows, one
// element, more than 65535 rows, more than 2^24 elements; in place; forward and
// backward.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dropout.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/dropout.cuh"

namespace {

using namespace tandem::gpu_test;

void check(int rows, int cols, float p, uint64_t seed, int64_t first_row, cudaStream_t stream) {
  const std::string shape = std::to_string(rows) + " x " + std::to_string(cols) + ", p " + std::to_string(p) +
                            ", first row " + std::to_string(first_row);
  const size_t count = static_cast<size_t>(rows) * cols;
  const std::vector<float> x = random_floats(count, 40, -3.0f, 3.0f);
  std::vector<float> want(count), want_back(count);
  tandem::cpu::dropout_forward(x.data(), want.data(), rows, cols, p, seed, first_row);
  tandem::cpu::dropout_backward(x.data(), want_back.data(), rows, cols, p, seed, first_row);

  DeviceBuffer<float> d_x = upload(x), d_y(count);
  poison(d_y);
  tandem::cuda::dropout_forward(at(d_x), at(d_y), rows, cols, p, seed, first_row, stream);
  sync(stream);
  GPU_CHECK("dropout_forward", shape, "bitwise the CPU's", bitwise_equal(download(d_y), want));

  poison(d_y);
  tandem::cuda::dropout_backward(at(d_x), at(d_y), rows, cols, p, seed, first_row, stream);
  sync(stream);
  GPU_CHECK("dropout_backward", shape, "bitwise the CPU's", bitwise_equal(download(d_y), want_back));

  tandem::cuda::dropout_forward(at(d_x), at(d_x), rows, cols, p, seed, first_row, stream);  // in place
  sync(stream);
  GPU_CHECK("dropout_forward", shape, "in place, bitwise the CPU's", bitwise_equal(download(d_x), want));
}

// A sample's mask does not depend on how the global batch is split: rows 10..29 of a
// batch that starts at global row 0 equal a local batch of 20 rows starting at 10.
void check_split_invariance(cudaStream_t stream) {
  const int rows = 40, cols = 33, first = 10, local = 20;
  const std::vector<float> x = random_floats(static_cast<size_t>(rows) * cols, 41);
  DeviceBuffer<float> d_x = upload(x), d_whole(x.size()), d_part(static_cast<size_t>(local) * cols);
  tandem::cuda::dropout_forward(at(d_x), at(d_whole), rows, cols, 0.5f, 99, 0, stream);
  tandem::cuda::dropout_forward(at(d_x) + static_cast<size_t>(first) * cols, at(d_part), local, cols, 0.5f, 99, first,
                                stream);
  sync(stream);
  const std::vector<float> whole = download(d_whole);
  const std::vector<float> slice(whole.begin() + static_cast<size_t>(first) * cols,
                                 whole.begin() + static_cast<size_t>(first + local) * cols);
  GPU_CHECK("dropout_forward", "40 x 33, rows 10..29", "a local batch's mask is the global batch's",
            bitwise_equal(download(d_part), slice));
}

}  // namespace

int main() {
  return tandem::gpu_test::run("dropout", [](cudaStream_t stream) {
    const int shapes[][2] = {{0, 5}, {5, 0}, {1, 1}, {3, 7}, {128, 1024}, {70000, 33}};
    const int64_t first_rows[] = {0, 12345, int64_t{1} << 40, -3};
    for (const auto& s : shapes)
      for (float p : {0.0f, 0.1f, 0.5f, 1.0f})
        for (int64_t first_row : first_rows) check(s[0], s[1], p, 0x5eed, first_row, stream);
    check(4100, 4100, 0.3f, 0xdeadbeefcafef00dULL, 777, stream);  // 2^24 + 2^20 elements
    check_split_invariance(stream);
    GPU_CHECK_THROWS("dropout_forward", "2 x 3, p 1.5", "p outside [0, 1]",
                     tandem::cuda::dropout_forward(nullptr, nullptr, 2, 3, 1.5f, 1, 0, stream));
    GPU_CHECK_THROWS("dropout_forward", "-2 x 3", "a negative row count",
                     tandem::cuda::dropout_forward(nullptr, nullptr, -2, 3, 0.5f, 1, 0, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
