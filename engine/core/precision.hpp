#pragma once
// The arithmetic of GEMMs and convolutions (experiment setting `precision`). Weights,
// gradients, optimizer state, activations between ops, the loss and the softmax stay
// float32 in every mode: only the products inside a GEMM or a convolution see the
// narrower inputs, and they accumulate in float32.
//   fp32  float32 throughout (cuBLAS and cuDNN held to pedantic float32 math);
//   tf32  inputs rounded to TF32 (10 mantissa bits), tensor cores on a GPU;
//   bf16  GEMM inputs rounded to bfloat16 (7 mantissa bits), tensor cores on a GPU
//         (cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF, PyTorch's float32 matmul precision
//         'medium'); convolutions in TF32 (cuDNN's float32 convolutions have no
//         bfloat16 mode without bfloat16 tensors).
// On the CPU the rounding is done before an fp32 GEMM, so a CPU worker computes what
// a GPU worker would (the products of rounded inputs are exact in float32): a mixed
// cluster trains with one arithmetic, and the CPU is the reference the GPU is tested
// against. It is not faster on the CPU.
#include <string>

namespace tandem {

enum class Precision : int { fp32 = 0, tf32 = 1, bf16 = 2 };

// "fp32" | "tf32" | "bf16"; anything else fails naming the three.
Precision parse_precision(const std::string& name);
const char* precision_name(Precision p);
// The mantissa bits a GEMM input keeps (23 in fp32: nothing is rounded).
int gemm_mantissa_bits(Precision p);
// The same for a convolution's inputs (bf16 convolutions run in TF32: see above).
int conv_mantissa_bits(Precision p);

}  // namespace tandem
