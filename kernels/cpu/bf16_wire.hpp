#pragma once
// Gradients on the wire in bfloat16 (comm.dtype = 'bf16', engine/dist/mpi_comm.cpp):
// a float32 rounded once to bfloat16 (to nearest, ties to even, as round_mantissa;
// NaN stays NaN, a value past bfloat16's largest finite becomes infinity) and kept as
// its 16 high bits; and back, exactly (a bfloat16 is a float32 with 16 zero low bits).
#include <cstddef>
#include <cstdint>

namespace tandem::cpu {

void to_bf16(const float* x, size_t count, uint16_t* out);
void from_bf16(const uint16_t* x, size_t count, float* out);
// acc[i] += x[i] (x in bfloat16): a sum accumulated in float32.
void add_bf16(const uint16_t* x, size_t count, float* acc);

}  // namespace tandem::cpu
