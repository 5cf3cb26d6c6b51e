#pragma once
// Float32 values rounded to fewer mantissa bits (7: bfloat16, 10: TF32), to nearest
// with ties to even as the hardware's float-to-bfloat16 conversion does; the result
// is still a float32 (its low bits zero). NaN and infinities pass unchanged; a value
// that rounds past the largest finite of the narrow format becomes infinity, as a
// real conversion does (the exponent range is float32's in both formats).
#include <cstddef>

namespace tandem::cpu {

float round_mantissa(float x, int bits);
// dst[r * cols + c] = round_mantissa(src[r * ld + c], bits) for r < rows, c < cols:
// a row-major matrix (leading dimension ld) into a dense copy.
void round_matrix(const float* src, int rows, int cols, int ld, int bits, float* dst);
// x[i] = round_mantissa(x[i], bits) for i < count (a narrow format's output).
void round_in_place(float* x, size_t count, int bits);

}  // namespace tandem::cpu
