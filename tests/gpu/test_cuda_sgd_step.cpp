// The fused SGD update on the GPU (kernels/cuda/sgd_step.cu) against the CPU's
// (kernels/cpu/sgd_step.cpp): momentum 0 with no velocity buffer, momentum, Nesterov;
// counts that leave a tail after the float4 loop, buffers one float off 16-byte
// alignment (the scalar path), and one of more than 2^24 parameters.
#include <string>
#include <vector>

#include "kernels/cpu/sgd_step.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/sgd_step.cuh"

namespace {

using namespace tandem::gpu_test;

struct Variant {
  const char* name;
  float momentum;
  bool nesterov;
};

void check(size_t count, size_t offset, const Variant& v, cudaStream_t stream) {
  const float lr = 0.05f, weight_decay = 5e-4f, grad_scale = 1.0f / 96;
  const std::string shape = std::to_string(count) + " parameters, offset " + std::to_string(offset) + ", " + v.name;
  std::vector<float> param = random_floats(count, 1), grad = random_floats(count, 2, -50.0f, 50.0f),
                     velocity = random_floats(count, 3);
  const bool with_velocity = v.momentum != 0.0f;

  std::vector<float> want_param = param, want_velocity = velocity;
  tandem::cpu::sgd_step(want_param.data(), grad.data(), with_velocity ? want_velocity.data() : nullptr, count, lr,
                        v.momentum, weight_decay, grad_scale, v.nesterov);

  DeviceBuffer<float> d_param = upload(param, offset), d_grad = upload(grad, offset),
                      d_velocity = upload(velocity, offset);
  tandem::cuda::sgd_step(at(d_param, offset), at(d_grad, offset), with_velocity ? at(d_velocity, offset) : nullptr,
                         count, lr, v.momentum, weight_decay, grad_scale, v.nesterov, stream);
  sync(stream);
  GPU_CHECK_CLOSE("sgd_step", shape, "param", download(d_param, offset), want_param, 1e-5);
  // Without momentum the velocity is not touched (and may not exist).
  GPU_CHECK_CLOSE("sgd_step", shape, "velocity", download(d_velocity, offset), want_velocity, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("sgd_step", [](cudaStream_t stream) {
    const Variant variants[] = {{"momentum 0", 0.0f, false}, {"momentum 0.9", 0.9f, false},
                                {"nesterov 0.9", 0.9f, true}, {"nesterov, momentum 0", 0.0f, true}};
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{1027}, size_t{269322},
                         size_t{1000003}})
      for (size_t offset : {size_t{0}, size_t{1}})
        for (const Variant& v : variants) check(count, offset, v, stream);
    // Beyond 2^24 parameters, aligned and not.
    check((size_t{1} << 24) + 3, 0, variants[2], stream);
    check((size_t{1} << 24) + 3, 1, variants[1], stream);

    float x = 0.0f;
    GPU_CHECK_THROWS("sgd_step", "1 parameter", "momentum without a velocity buffer",
                     tandem::cuda::sgd_step(&x, &x, nullptr, 1, 0.1f, 0.9f, 0.0f, 1.0f, false, stream));
    GPU_CHECK_THROWS("sgd_step", "1 parameter", "a null param",
                     tandem::cuda::sgd_step(nullptr, &x, &x, 1, 0.1f, 0.9f, 0.0f, 1.0f, false, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
