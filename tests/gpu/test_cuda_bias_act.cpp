// Bias + activation forward and ReLU backward on the GPU (kernels/cuda/bias_act.cu)
// against kernels/cpu/bias_act.cpp: with and without bias, ReLU and none; one row,
// one column, sizes that are not multiples of the block, zero rows, more than 65535
// rows, more than 2^24 elements, more than 2^31 (the 64-bit index path, where the
// device has the memory), and for act_backward counts with a float4 tail and an
// unaligned buffer.
#include <string>
#include <vector>

#include "kernels/cpu/bias_act.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/bias_act.cuh"

namespace {

using namespace tandem::gpu_test;
using tandem::Activation;

const char* name_of(Activation act) { return act == Activation::relu ? "relu" : "none"; }

void check_dense(int rows, int cols, Activation act, bool with_bias, cudaStream_t stream) {
  const std::string shape = std::to_string(rows) + " x " + std::to_string(cols) + ", " + name_of(act) +
                            (with_bias ? ", bias" : ", no bias");
  const size_t count = static_cast<size_t>(rows) * cols;
  std::vector<float> y = random_floats(count, 10), bias = random_floats(static_cast<size_t>(cols), 11);
  std::vector<float> want = y;
  tandem::cpu::bias_act_forward(want.data(), with_bias ? bias.data() : nullptr, rows, cols, act);
  DeviceBuffer<float> d_y = upload(y), d_bias = upload(bias);
  tandem::cuda::bias_act_forward(at(d_y), with_bias ? at(d_bias) : nullptr, rows, cols, act, stream);
  sync(stream);
  GPU_CHECK_CLOSE("bias_act_forward", shape, "y", download(d_y), want, 1e-5);
}

void check_channel(int batch, int channels, int spatial, Activation act, bool with_bias, cudaStream_t stream) {
  const std::string shape = std::to_string(batch) + " x " + std::to_string(channels) + " x " +
                            std::to_string(spatial) + ", " + name_of(act) + (with_bias ? ", bias" : ", no bias");
  const size_t count = static_cast<size_t>(batch) * channels * spatial;
  std::vector<float> y = random_floats(count, 12), bias = random_floats(static_cast<size_t>(channels), 13);
  std::vector<float> want = y;
  tandem::cpu::channel_bias_act_forward(want.data(), with_bias ? bias.data() : nullptr, batch, channels, spatial, act);
  DeviceBuffer<float> d_y = upload(y), d_bias = upload(bias);
  tandem::cuda::channel_bias_act_forward(at(d_y), with_bias ? at(d_bias) : nullptr, batch, channels, spatial, act,
                                         stream);
  sync(stream);
  GPU_CHECK_CLOSE("channel_bias_act_forward", shape, "y", download(d_y), want, 1e-5);
}

void check_backward(size_t count, size_t offset, Activation act, cudaStream_t stream) {
  const std::string shape = std::to_string(count) + " elements, offset " + std::to_string(offset) + ", " + name_of(act);
  std::vector<float> y = random_floats(count, 14), dy = random_floats(count, 15);
  for (size_t i = 0; i < count; i += 7) y[i] = 0.0f;  // the kink: ReLU's derivative at 0 is 0
  std::vector<float> want = dy;
  tandem::cpu::act_backward(y.data(), want.data(), count, act);
  DeviceBuffer<float> d_y = upload(y, offset), d_dy = upload(dy, offset);
  tandem::cuda::act_backward(at(d_y, offset), at(d_dy, offset), count, act, stream);
  sync(stream);
  GPU_CHECK_CLOSE("act_backward", shape, "dy", download(d_dy, offset), want, 1e-5);
}

// More than 2^31 elements: the 64-bit index path (8.6 GB on the device), with a cheap
// deterministic fill instead of the RNG. Skipped, with a line saying so, when the
// device lacks the memory.
void check_channel_64bit(cudaStream_t stream) {
  const int batch = 4, channels = 5, spatial = 107374183;  // 2^31 + 12 elements
  const size_t count = static_cast<size_t>(batch) * channels * spatial;
  const std::string shape = std::to_string(batch) + " x " + std::to_string(channels) + " x " +
                            std::to_string(spatial) + ", relu, bias";
  size_t free_bytes = 0, total_bytes = 0;
  GPU_CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < count * sizeof(float) + (size_t{1} << 30)) {
    std::printf("note channel_bias_act_forward [%s]: not run, the device has %zu bytes free\n", shape.c_str(),
                free_bytes);
    return;
  }
  std::vector<float> y(count);
  for (size_t i = 0; i < count; ++i) y[i] = static_cast<float>((i * 2654435761u) % 2001) * 1e-3f - 1.0f;
  const std::vector<float> bias = {0.25f, -0.5f, 0.75f, -1.0f, 0.125f};
  DeviceBuffer<float> d_y = upload(y), d_bias = upload(bias);
  tandem::cpu::channel_bias_act_forward(y.data(), bias.data(), batch, channels, spatial, Activation::relu);
  tandem::cuda::channel_bias_act_forward(at(d_y), at(d_bias), batch, channels, spatial, Activation::relu, stream);
  sync(stream);
  GPU_CHECK_CLOSE("channel_bias_act_forward", shape, "y (64-bit indices)", download(d_y), y, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("bias_act", [](cudaStream_t stream) {
    const int dense[][2] = {{0, 7}, {5, 0}, {1, 1}, {1, 33}, {37, 10}, {257, 129}, {128, 1024}, {70000, 33}};
    for (const auto& s : dense)
      for (Activation act : {Activation::none, Activation::relu})
        for (bool with_bias : {true, false}) check_dense(s[0], s[1], act, with_bias, stream);
    // 2^24 + 2^20 elements, beyond what float can count exactly.
    check_dense(17408, 1024, Activation::relu, true, stream);

    const int channel[][3] = {{0, 3, 4}, {2, 3, 0}, {1, 1, 1}, {2, 3, 5}, {7, 16, 49}, {128, 256, 1},
                              {3, 2, 70001}, {130, 64, 2048}};
    for (const auto& s : channel)
      for (Activation act : {Activation::none, Activation::relu})
        for (bool with_bias : {true, false}) check_channel(s[0], s[1], s[2], act, with_bias, stream);

    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{5}, size_t{1027}, (size_t{1} << 24) + 5})
      for (size_t offset : {size_t{0}, size_t{1}})
        for (Activation act : {Activation::none, Activation::relu}) check_backward(count, offset, act, stream);

    check_channel_64bit(stream);

    GPU_CHECK_THROWS("bias_act_forward", "-1 x 3", "a negative row count",
                     tandem::cuda::bias_act_forward(nullptr, nullptr, -1, 3, Activation::relu, stream));
    GPU_CHECK_THROWS("bias_act_forward", "2 x 3", "a null y",
                     tandem::cuda::bias_act_forward(nullptr, nullptr, 2, 3, Activation::relu, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
