#include "kernels/cpu/gather_rows.hpp"

#include "engine/core/error.hpp"

namespace tandem::cpu {

void gather_byte_rows(const uint8_t* samples, int64_t sample_bytes, const uint8_t* label_rows, int64_t label_bytes,
                      const float* table, int64_t rows, const int64_t* indices, int64_t count, float* x,
                      int32_t* labels) {
  TANDEM_CHECK(sample_bytes >= 0 && label_bytes >= 0 && count >= 0, "gather_byte_rows: negative size (sample ",
               sample_bytes, " bytes, label ", label_bytes, " bytes, ", count, " rows)");
  for (int64_t i = 0; i < count; ++i) {
    const int64_t s = indices[i];
    TANDEM_CHECK(s >= 0 && s < rows, "gather_byte_rows: sample index ", s, " outside [0, ", rows, ")");
    const uint8_t* src = samples + s * sample_bytes;
    float* dst = x + i * sample_bytes;
    for (int64_t j = 0; j < sample_bytes; ++j) dst[j] = table[src[j]];
    const uint8_t* l = label_rows + s * label_bytes;
    for (int64_t k = 0; k < label_bytes; ++k) labels[i * label_bytes + k] = l[k];
  }
}

}  // namespace tandem::cpu
