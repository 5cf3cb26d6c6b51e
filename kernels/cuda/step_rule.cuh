#pragma once
// The fused step's small kernels (kernels/step_rule.hpp): deciding the step on the
// device, and moving its few scalars in and out of device memory in stream order.
// Each is one thread's work: they exist so the host need not wait for a number.
#include <cuda_runtime_api.h>

#include "kernels/step_rule.hpp"

namespace tandem::cuda {

// decide_step(step, totals, rule) on the device.
void decide_step(double* step, const double* totals, const StepRule& rule, cudaStream_t stream);
// dst[i] = src[i] for i < count <= kMaxDoubles, the values travelling as the kernel's
// argument: queued in order with the stream's other work, src free on return, and
// nothing pageable handed to a copy engine.
constexpr int kMaxDoubles = 16;
void write_doubles(double* dst, const double* src, int count, cudaStream_t stream);
// *out = double(*norm)^2: a norm cuBLAS left in device memory, made a squared norm.
void square_norm(const float* norm, double* out, cudaStream_t stream);

}  // namespace tandem::cuda
