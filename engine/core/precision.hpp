#pragma once
// The arithmetic of GEMMs and convolutions (experiment setting `precision`). Weights,
// gradients, optimizer state, activations between ops, the loss and the softmax stay
// float32 in every mode: only the products inside a GEMM or a convolution see the
// narrower inputs, and they accumulate in float32.
//   fp32  float32 throughout (cuBLAS and cuDNN held to pedantic float32 math);
//   tf32  inputs rounded to TF32 (10 mantissa bits), tensor cores on a GPU;
//   bf16  GEMM inputs rounded to bfloat16 (7 mantissa bits), tensor cores on a GPU
//         (cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF, PyTorch's float32 matmul precision
//         'medium'). Convolutions take bfloat16 inputs and give bfloat16 outputs
//         (y, dW and dx each rounded once, after a float32 accumulation), as PyTorch's
//         autocast does: cuDNN's bfloat16 convolutions (PSEUDO_BFLOAT16_CONFIG) have
//         bfloat16 outputs, so the output is rounded on the CPU too.
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
// The same for a convolution's inputs,
int conv_mantissa_bits(Precision p);
// and for its outputs (y, dW, dx): 7 in bf16, where cuDNN writes bfloat16; 23 (not
// rounded) otherwise.
int conv_output_mantissa_bits(Precision p);

}  // namespace tandem
