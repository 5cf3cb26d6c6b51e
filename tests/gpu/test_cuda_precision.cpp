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
#include <algorithm>
#include <cmath>
#include <cstdio>
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

// Whether every element of got is within one unit of the narrow format (2^-bits of
// its own magnitude) of want, plus 1e-5 of the largest: the float32 sums before the
// output's rounding differ in order, so a value may land one bfloat16 unit away, but
// no further, small values included.
bool within_a_unit(const std::vector<float>& got, const std::vector<float>& want, int bits) {
  if (got.size() != want.size()) return false;
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!(std::fabs(g - w) <= std::ldexp(std::fabs(w), -bits) + 1e-5 * scale)) {
      std::printf("  element %zu: %.9g against %.9g\n", i, g, w);
      return false;
    }
  }
  return true;
}

// A convolution (forward and both gradients) against the CPU device of the same
// precision. tf32: TF32 tensor cores, inputs rounded as the CPU's. bf16: cuDNN's
// bfloat16 convolution, whose outputs are bfloat16, as the CPU rounds them; each
// element within a bfloat16 unit of the CPU's. Two shapes: LeNet's second layer, and
// its first (one input channel, no padding, no data gradient: the input's), and an
// empty batch.
void check_convolution(Precision p) {
  CudaOptions o;
  o.precision = p;
  const std::unique_ptr<Device> gpu = make_cuda_device(o);
  Device& rounded = cpu_device(p);
  const std::string name = std::string("conv ") + precision_name(p);
  const double tol = p == Precision::bf16 ? 1e-2 : 2e-3;
  ConvShape second, first, empty;
  second.batch = 8, second.in_channels = 6, second.height = 14, second.width = 14, second.out_channels = 16,
  second.kernel = 5, second.pad = 2;
  first.batch = 8, first.in_channels = 1, first.height = 28, first.width = 28, first.out_channels = 6,
  first.kernel = 5, first.pad = 0;
  empty = second, empty.batch = 0;
  for (const ConvShape& s : {second, first, empty}) {
    const bool with_dx = s.in_channels > 1;
    const std::string shape = std::to_string(s.batch) + "x" + std::to_string(s.in_channels) + "x" +
                              std::to_string(s.height) + "x" + std::to_string(s.width) + " k" +
                              std::to_string(s.kernel) + (with_dx ? "" : ", no dx");
    const size_t xs = s.x_size(), ws = s.w_size(), ys = s.y_size();
    const auto x = random_floats(xs, 5), w = random_floats(ws, 6), dy = random_floats(ys, 7);
    std::vector<float> y[2], dw[2], dx[2];
    Device* devs[2] = {gpu.get(), &rounded};
    for (int i = 0; i < 2; ++i) {
      DeviceCopy xd(*devs[i], x), wd(*devs[i], w), dyd(*devs[i], dy), yd(*devs[i], std::vector<float>(ys)),
          dwd(*devs[i], std::vector<float>(ws, 1.0f)), dxd(*devs[i], std::vector<float>(xs));
      devs[i]->conv2d_forward(s, xd.p, wd.p, yd.p);
      devs[i]->conv2d_backward(s, xd.p, wd.p, dyd.p, dwd.p, with_dx ? dxd.p : nullptr);
      y[i] = yd.to_host(), dw[i] = dwd.to_host(), dx[i] = dxd.to_host();
    }
    GPU_CHECK_CLOSE(name, shape, "y", y[0], y[1], tol);
    GPU_CHECK_CLOSE(name, shape, "dW", dw[0], dw[1], tol);
    if (with_dx) GPU_CHECK_CLOSE(name, shape, "dx", dx[0], dx[1], tol);
    if (s.batch == 0) {
      GPU_CHECK(name, shape, "an empty batch's dW is zero",
                std::all_of(dw[0].begin(), dw[0].end(), [](float v) { return v == 0.0f; }));
      continue;
    }
    if (p != Precision::bf16) continue;
    GPU_CHECK(name, shape, "y within a bfloat16 unit of the CPU's, element by element", within_a_unit(y[0], y[1], 7));
    GPU_CHECK(name, shape, "dW within a bfloat16 unit, element by element", within_a_unit(dw[0], dw[1], 7));
    if (with_dx)
      GPU_CHECK(name, shape, "dx within a bfloat16 unit, element by element", within_a_unit(dx[0], dx[1], 7));
  }
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
