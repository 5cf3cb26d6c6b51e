#pragma once
// GEMM through OpenBLAS's cblas, row-major. The BLAS thread count is set once per
// worker (one thread by default) so ranks sharing a machine do not oversubscribe it.
#include <cstdint>

namespace tandem::cpu {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc);
// count independent products, operand i at a + i * stride_a (likewise b, c).
void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                  int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc,
                  int64_t stride_c, int count);
void set_blas_threads(int threads);
int blas_threads();

}  // namespace tandem::cpu
