// The fused AdamW update on the GPU (kernels/cuda/adamw_step.cu) against the CPU's
// (kernels/cpu/adamw_step.cpp): three steps in a row (so m and v carry over), with and
// without weight decay, early (large bias corrections) and late steps, counts that
// are 0, 1 and odd, buffers one float off 16-byte alignment, and more than 2^24
// parameters. param, m and v are all compared.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/adamw_step.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/adamw_step.cuh"

namespace {

using namespace tandem::gpu_test;

void check(size_t count, size_t offset, float weight_decay, int first_step, cudaStream_t stream) {
  const float lr = 6e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, grad_scale = 0.7f / 64;
  const std::string shape = std::to_string(count) + " parameters, offset " + std::to_string(offset) +
                            ", weight decay " + std::to_string(weight_decay) + ", from step " +
                            std::to_string(first_step);
  std::vector<float> param = random_floats(count, 60), m = random_floats(count, 61, -0.01f, 0.01f),
                     v = random_floats(count, 62, 0.0f, 1e-4f);
  DeviceBuffer<float> d_param = upload(param, offset), d_m = upload(m, offset), d_v = upload(v, offset);
  for (int step = first_step; step < first_step + 3; ++step) {
    const std::vector<float> grad = random_floats(count, 63 + step, -5.0f, 5.0f);
    const float bc1 = 1.0f - std::pow(beta1, static_cast<float>(step));
    const float bc2 = 1.0f - std::pow(beta2, static_cast<float>(step));
    tandem::cpu::adamw_step(param.data(), grad.data(), m.data(), v.data(), count, lr, beta1, beta2, eps, weight_decay,
                            grad_scale, bc1, bc2);
    DeviceBuffer<float> d_grad = upload(grad, offset);
    tandem::cuda::adamw_step(at(d_param, offset), at(d_grad, offset), at(d_m, offset), at(d_v, offset), count, lr,
                             beta1, beta2, eps, weight_decay, grad_scale, bc1, bc2, stream);
    sync(stream);
  }
  GPU_CHECK_CLOSE("adamw_step", shape, "param", download(d_param, offset), param, 1e-5);
  GPU_CHECK_CLOSE("adamw_step", shape, "m", download(d_m, offset), m, 1e-5);
  GPU_CHECK_CLOSE("adamw_step", shape, "v", download(d_v, offset), v, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("adamw_step", [](cudaStream_t stream) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{5}, size_t{1027}, size_t{1000003}})
      for (size_t offset : {size_t{0}, size_t{1}})
        for (float wd : {0.0f, 0.1f})
          for (int first_step : {1, 1000}) check(count, offset, wd, first_step, stream);
    check((size_t{1} << 24) + 3, 1, 0.1f, 1, stream);
    float x = 0.0f;
    GPU_CHECK_THROWS("adamw_step", "1 parameter", "a null m",
                     tandem::cuda::adamw_step(&x, &x, nullptr, &x, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 0.1f,
                                              0.05f, stream));
    GPU_CHECK_THROWS("adamw_step", "1 parameter", "a bias correction of 0 (step 0)",
                     tandem::cuda::adamw_step(&x, &x, &x, &x, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 0.0f, 0.0f,
                                              stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
