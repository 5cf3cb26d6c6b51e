#include "engine/core/precision.hpp"

#include "engine/core/error.hpp"

namespace tandem {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "tf32") return Precision::tf32;
  if (name == "bf16") return Precision::bf16;
  TANDEM_FAIL_HINT("use precision = 'fp32', 'tf32' or 'bf16'", "unknown precision '", name, "'");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

int gemm_mantissa_bits(Precision p) {
  switch (p) {
    case Precision::tf32: return 10;
    case Precision::bf16: return 7;
    case Precision::fp32: break;
  }
  return 23;
}

int conv_mantissa_bits(Precision p) { return gemm_mantissa_bits(p); }

int conv_output_mantissa_bits(Precision p) { return p == Precision::bf16 ? 7 : 23; }

}  // namespace tandem
