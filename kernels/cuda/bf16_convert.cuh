#pragma once
// float32 <-> bfloat16 for the bf16 convolutions (engine/core/cudnn_ops.*): cuDNN's
// bfloat16 convolutions read and write bfloat16 tensors, while tandem keeps every
// activation, weight and gradient in float32. A bfloat16 is its 16 bits here
// (uint16_t), so callers need not include cuda_bf16.h.
//   to_bf16:   y = x rounded to nearest, ties to even (NaN stays NaN, a value past
//              the largest finite bfloat16 becomes infinity), the CPU's round_mantissa
//              at 7 bits;
//   from_bf16: y = x widened (exact).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

void to_bf16(const float* x, uint16_t* y, size_t count, cudaStream_t stream);
void from_bf16(const uint16_t* x, float* y, size_t count, cudaStream_t stream);

}  // namespace tandem::cuda
