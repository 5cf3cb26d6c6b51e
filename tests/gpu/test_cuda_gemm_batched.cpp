// The CUDA device's batched GEMM (cublasSgemmStridedBatched behind
// engine/core/cuda_device.cpp) against the CPU device's (a loop of cblas calls), in
// row-major with every transpose combination: attention's shapes (scores q k^T and
// the weighted values att v over seq x head_dim blocks), batch strides larger than a
// matrix (padding between operands, and a stride 0 operand shared by every product),
// leading dimensions larger than a row, k = 0 (C = beta C: cuBLAS refuses ld 0 unless
// the device clamps it, issue 19), count 0, m or n 0 (nothing written), and beta 0
// over a C holding NaN (it must not be read).
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/cuda_device.hpp"
#include "engine/core/device.hpp"

using namespace tandem;
using gpu_test::DeviceCopy;
using gpu_test::random_floats;

namespace {

struct Case {
  int m, n, k, count;
  int pad_ld;          // added to every leading dimension
  int64_t pad_stride;  // added to every batch stride
  bool shared_b;       // B's stride 0: one B for every product
  float beta;
};

void check(Device& gpu, const Case& c, bool ta, bool tb) {
  Device& cpu = cpu_device();
  const int lda = (ta ? c.m : c.k) + c.pad_ld, ldb = (tb ? c.k : c.n) + c.pad_ld, ldc = c.n + c.pad_ld;
  const int64_t a_rows = ta ? c.k : c.m, b_rows = tb ? c.n : c.k;
  const int64_t stride_a = a_rows * lda + c.pad_stride, stride_c = int64_t{c.m} * ldc + c.pad_stride;
  const int64_t stride_b = c.shared_b ? 0 : b_rows * ldb + c.pad_stride;
  const int64_t products = std::max(c.count, 1);
  const auto a = random_floats(static_cast<size_t>(stride_a * products + 1), 110);
  const auto b = random_floats(static_cast<size_t>(std::max<int64_t>(stride_b, b_rows * ldb) * products + 1), 111);
  auto c0 = random_floats(static_cast<size_t>(stride_c * products + 1), 112);
  // beta 0: C holds NaN, which must not be read (BLAS writes C without reading it;
  // OpenBLAS and cuBLAS both do). NaN rather than a large number, so the padding, also
  // NaN on both sides, does not swell the scale of the comparison.
  if (c.beta == 0.0f) std::fill(c0.begin(), c0.end(), NAN);
  const std::string shape = std::to_string(c.count) + " x " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                            std::to_string(c.k) + (ta ? " A^T" : "") + (tb ? " B^T" : "") + ", ld +" +
                            std::to_string(c.pad_ld) + ", stride +" + std::to_string(c.pad_stride) +
                            (c.shared_b ? ", B shared" : "") + ", beta " + std::to_string(c.beta);
  DeviceCopy ac(cpu, a), bc(cpu, b), cc(cpu, c0), ag(gpu, a), bg(gpu, b), cg(gpu, c0);
  cpu.gemm_batched(ta, tb, c.m, c.n, c.k, 1.25f, ac.p, lda, stride_a, bc.p, ldb, stride_b, c.beta, cc.p, ldc,
                   stride_c, c.count);
  gpu.gemm_batched(ta, tb, c.m, c.n, c.k, 1.25f, ag.p, lda, stride_a, bg.p, ldb, stride_b, c.beta, cg.p, ldc,
                   stride_c, c.count);
  // The padding between rows and between products must come back untouched too:
  // the whole buffer is compared.
  GPU_CHECK_CLOSE("gemm_batched", shape, "C", cg.to_host(), cc.to_host(), 1e-5);
}

// The plain gemm at k = 0 with beta 0 over garbage: C becomes 0 (issue 19's case with
// the other beta; test_cuda_device.cpp has beta 0.5).
void check_gemm_k0(Device& gpu) {
  Device& cpu = cpu_device();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int m = 33, n = 65, k = 0, lda = ta ? m : k, ldb = tb ? k : n;
      const std::vector<float> one(1, 1.0f), garbage(static_cast<size_t>(m) * n, 3e38f);
      DeviceCopy ac(cpu, one), bc(cpu, one), cc(cpu, garbage), ag(gpu, one), bg(gpu, one), cg(gpu, garbage);
      cpu.gemm(ta, tb, m, n, k, 1.25f, ac.p, lda, bc.p, ldb, 0.0f, cc.p, n);
      gpu.gemm(ta, tb, m, n, k, 1.25f, ag.p, lda, bg.p, ldb, 0.0f, cg.p, n);
      GPU_CHECK_CLOSE("gemm", std::string("33x65x0") + (ta ? " A^T" : "") + (tb ? " B^T" : "") + ", beta 0", "C",
                      cg.to_host(), cc.to_host(), 0.0);
    }
}

}  // namespace

int main() {
  return gpu_test::run("gemm_batched", [](cudaStream_t) {
    const std::unique_ptr<Device> gpu = make_cuda_device(CudaOptions{});
    const Case cases[] = {
        {1, 1, 1, 1, 0, 0, false, 0.5f},     {7, 13, 5, 3, 0, 0, false, 0.5f},
        {7, 13, 5, 3, 3, 11, false, 0.5f},   {9, 4, 6, 5, 0, 7, true, 1.0f},
        {64, 64, 64, 12, 0, 0, false, 0.0f},  // scores: seq x seq from seq x head_dim blocks
        {64, 64, 64, 12, 0, 0, false, 1.0f},  // accumulating (a gradient added to)
        {256, 64, 256, 6, 0, 0, false, 0.0f}, // att v at a GPT's sequence length
        {33, 65, 0, 2, 0, 0, false, 0.5f},    {33, 65, 0, 2, 0, 5, false, 0.0f},
        {5, 4, 3, 0, 0, 0, false, 0.5f},      {0, 4, 3, 2, 0, 0, false, 0.5f},
        {4, 0, 3, 2, 0, 0, false, 0.5f},
    };
    for (const Case& c : cases)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) check(*gpu, c, ta, tb);
    check_gemm_k0(*gpu);
    GPU_CHECK_THROWS("gemm_batched", "-1 products", "a negative count",
                     gpu->gemm_batched(false, false, 2, 2, 2, 1.0f, nullptr, 2, 4, nullptr, 2, 4, 0.0f, nullptr, 2, 4,
                                       -1));
  });
}

#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
