// One-thread kernels around the fused step (kernels/cuda/step_rule.cuh). They cost a
// launch each (a few microseconds, nothing inside a captured graph), which is what
// removing a wait of the host on the device is worth.
#include <cstring>

#include "kernels/cuda/launch_check.cuh"
#include "kernels/cuda/step_rule.cuh"

namespace tandem::cuda {

namespace {

struct Doubles {
  double v[kMaxDoubles];
};

__global__ void decide_kernel(double* step, const double* totals, StepRule rule) { decide_step(step, totals, rule); }

__global__ void write_kernel(double* dst, Doubles src, int count) {
  for (int i = 0; i < count; ++i) dst[i] = src.v[i];
}

__global__ void square_kernel(const float* norm, double* out) {
  const double n = static_cast<double>(*norm);
  *out = n * n;
}

}  // namespace

void decide_step(double* step, const double* totals, const StepRule& rule, cudaStream_t stream) {
  TANDEM_CHECK(step && totals, "decide_step: no step scalars or loss totals");
  decide_kernel<<<1, 1, 0, stream>>>(step, totals, rule);
  TANDEM_CUDA_CHECK_LAUNCH("decide_step", "max_norm ", rule.max_norm);
}

void write_doubles(double* dst, const double* src, int count, cudaStream_t stream) {
  TANDEM_CHECK(count >= 0 && count <= kMaxDoubles, "write_doubles of ", count, " values (at most ", kMaxDoubles, ")");
  if (count == 0) return;
  Doubles d{};
  std::memcpy(d.v, src, static_cast<size_t>(count) * sizeof(double));
  write_kernel<<<1, 1, 0, stream>>>(dst, d, count);
  TANDEM_CUDA_CHECK_LAUNCH("write_doubles", count, " values");
}

void square_norm(const float* norm, double* out, cudaStream_t stream) {
  square_kernel<<<1, 1, 0, stream>>>(norm, out);
  TANDEM_CUDA_CHECK_LAUNCH("square_norm", "one value");
}

}  // namespace tandem::cuda
