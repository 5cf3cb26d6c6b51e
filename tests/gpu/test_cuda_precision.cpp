// precision = 'tf32' | 'bf16' on the GPU (engine/core/precision.hpp): the CUDA
// device's GEMMs (cuBLAS with the TF32 math mode, or cublasGemmEx with
// CUBLAS_COMPUTE_32F_FAST_16BF) and convolutions (cuDNN on TF32 tensor cores, or its
// bfloat16 convolutions with bfloat16 outputs) against
// the CPU device of the same precision, which rounds the inputs to nearest before a
// float32 GEMM. cuBLAS may round its inputs differently (or, for a shape it finds too
// small for tensor cores, not at all), so the tolerances allow a unit in the last
// place of the narrow format per product; on a large GEMM the bf16 result must be
// measurably off float32 (the tensor cores were used) and close to the rounded
// reference. Exits 77 without a GPU.
//
// Written in a session without a GPU: it compiles, and has not run yet.
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/cuda_device.hpp"
#include "engine/core/device.hpp"
#include "engine/core/precision.hpp"

using namespace tandem;
using gpu_test::DeviceCopy;
using gpu_test::random_floats;

namespace {

// C = op(A) op(B) on `dev` (row-major, tight leading dimensions), from the host.
std::vector<float> product(Device& dev, bool ta, bool tb, int m, int n, int k, const std::vector<float>& a,
                           const std::vector<float>& b) {
  DeviceCopy ad(dev, a), bd(dev, b), cd(dev, std::vector<float>(static_cast<size_t>(m) * n, 0.0f));
  dev.gemm(ta, tb, m, n, k, 1.0f, ad.p, ta ? m : k, bd.p, tb ? k : n, 0.0f, cd.p, n);
  return cd.to_host();
}

std::string shape_name(int m, int n, int k, bool ta, bool tb) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (ta ? " A^T" : "") +
         (tb ? " B^T" : "");
}

void check_gemms(Precision p) {
  CudaOptions o;
  o.precision = p;
  const std::unique_ptr<Device> gpu = make_cuda_device(o);
  Device& rounded = cpu_device(p);
  const std::string name = std::string("gemm ") + precision_name(p);
  // A unit in the last place of the narrow format, per product, scaled by the result.
  const double tol = p == Precision::bf16 ? 1e-2 : 2e-3;
  for (auto [m, n, k] : {std::tuple{7, 13, 5}, {64, 256, 784}, {1024, 10, 256}, {33, 65, 0}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const auto a = random_floats(static_cast<size_t>(std::max(1, m * k)), 1);
        const auto b = random_floats(static_cast<size_t>(std::max(1, k * n)), 2);
        GPU_CHECK_CLOSE(name, shape_name(m, n, k, ta, tb), "C against the CPU's rounded inputs",
                        product(*gpu, ta, tb, m, n, k, a, b), product(rounded, ta, tb, m, n, k, a, b), tol);
      }
  // A GEMM large enough for tensor cores: measurably off float32, near the rounding.
  const int big = 1024;
  const auto a = random_floats(static_cast<size_t>(big) * big, 3), b = random_floats(static_cast<size_t>(big) * big, 4);
  const auto got = product(*gpu, false, false, big, big, big, a, b);
  const double to_fp32 = gpu_test::scaled_error(got, product(cpu_device(), false, false, big, big, big, a, b));
  const double to_rounded = gpu_test::scaled_error(got, product(rounded, false, false, big, big, big, a, b));
  std::printf("%s 1024^3: scaled error to fp32 %.3g, to the CPU's rounded inputs %.3g\n", name.c_str(), to_fp32,
              to_rounded);
  GPU_CHECK(name, "1024^3", "tensor cores used (error to fp32 above 1e-5)", to_fp32 > 1e-5);
  GPU_CHECK(name, "1024^3", "rounding as the CPU's within a narrow ulp", to_rounded < tol);
}

// A convolution (forward and both gradients) against the CPU device of the same
// precision. tf32: TF32 tensor cores, inputs rounded as the CPU's. bf16: cuDNN's
// bfloat16 convolution, whose outputs are bfloat16 (every value's low 16 bits zero),
// as the CPU rounds them; the float32 sums before that rounding differ in order, so a
// value may land one bfloat16 unit away.
void check_convolution(Precision p) {
  CudaOptions o;
  o.precision = p;
  const std::unique_ptr<Device> gpu = make_cuda_device(o);
  Device& rounded = cpu_device(p);
  ConvShape s;
  s.batch = 8, s.in_channels = 6, s.height = 14, s.width = 14, s.out_channels = 16, s.kernel = 5, s.pad = 2;
  const size_t xs = s.x_size(), ws = s.w_size(), ys = s.y_size();
  const auto x = random_floats(xs, 5), w = random_floats(ws, 6), dy = random_floats(ys, 7);
  std::vector<float> y[2], dw[2], dx[2];
  Device* devs[2] = {gpu.get(), &rounded};
  for (int i = 0; i < 2; ++i) {
    DeviceCopy xd(*devs[i], x), wd(*devs[i], w), dyd(*devs[i], dy), yd(*devs[i], std::vector<float>(ys)),
        dwd(*devs[i], std::vector<float>(ws)), dxd(*devs[i], std::vector<float>(xs));
    devs[i]->conv2d_forward(s, xd.p, wd.p, yd.p);
    devs[i]->conv2d_backward(s, xd.p, wd.p, dyd.p, dwd.p, dxd.p);
    y[i] = yd.to_host(), dw[i] = dwd.to_host(), dx[i] = dxd.to_host();
  }
  const std::string name = std::string("conv ") + precision_name(p);
  const double tol = p == Precision::bf16 ? 1e-2 : 2e-3;
  GPU_CHECK_CLOSE(name, "8x6x14x14 k5", "y", y[0], y[1], tol);
  GPU_CHECK_CLOSE(name, "8x6x14x14 k5", "dW", dw[0], dw[1], tol);
  GPU_CHECK_CLOSE(name, "8x6x14x14 k5", "dx", dx[0], dx[1], tol);
  if (p != Precision::bf16) return;
  const auto bfloat16_values = [](const std::vector<float>& v) {
    for (float f : v) {
      uint32_t u;
      std::memcpy(&u, &f, sizeof u);
      if (u & 0xFFFFu) return false;
    }
    return true;
  };
  GPU_CHECK(name, "8x6x14x14 k5", "y holds bfloat16 values", bfloat16_values(y[0]));
  GPU_CHECK(name, "8x6x14x14 k5", "dW holds bfloat16 values", bfloat16_values(dw[0]));
  GPU_CHECK(name, "8x6x14x14 k5", "dx holds bfloat16 values", bfloat16_values(dx[0]));
}

}  // namespace

int main() {
  return gpu_test::run("precision", [](cudaStream_t) {
    check_gemms(Precision::tf32);
    check_gemms(Precision::bf16);
    check_convolution(Precision::tf32);
    check_convolution(Precision::bf16);
  });
}

#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
