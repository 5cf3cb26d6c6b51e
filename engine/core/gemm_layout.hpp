#pragma once
// tandem's matrices are row-major; cuBLAS (like the reference BLAS) is column-major.
// A row-major matrix read as column-major is its transpose, so C = op(A) op(B) in
// row-major is C^T = op(B)^T op(A)^T in column-major: swap the operands and the
// sizes m and n, keep each operand's transpose flag and leading dimension. The
// mapping is a pure function so the host tests check it against cblas in
// column-major mode, with no GPU.
namespace tandem {

struct ColumnMajorGemm {
  bool trans_first, trans_second;  // cuBLAS transa, transb
  int m, n, k;
  const float* first;
  int ld_first;
  const float* second;
  int ld_second;
};

inline ColumnMajorGemm to_column_major(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                                       const float* b, int ldb) {
  return ColumnMajorGemm{trans_b, trans_a, n, m, k, b, ldb, a, lda};
}

}  // namespace tandem
