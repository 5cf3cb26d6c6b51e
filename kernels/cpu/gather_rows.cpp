#include "kernels/cpu/gather_rows.hpp"

#include "engine/core/error.hpp"

namespace tandem::cpu {

void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x, int32_t* labels) {
  TANDEM_CHECK(t.sample_bytes >= 0 && t.label_bytes >= 0 && count >= 0, "gather_byte_rows: negative size (sample ",
               t.sample_bytes, " bytes, label ", t.label_bytes, " bytes, ", count, " rows)");
  for (int64_t i = 0; i < count; ++i) {
    const int64_t s = indices[i];
    TANDEM_CHECK(s >= 0 && s < t.rows, "gather_byte_rows: sample index ", s, " outside [0, ", t.rows, ")");
    const uint8_t* src = t.samples + s * t.sample_stride;
    float* dst = x + i * t.sample_bytes;
    for (int64_t j = 0; j < t.sample_bytes; ++j) dst[j] = t.table[src[j]];
    const uint8_t* l = t.labels + s * t.label_stride;
    for (int64_t k = 0; k < t.label_bytes; ++k) labels[i * t.label_bytes + k] = l[k];
  }
}

}  // namespace tandem::cpu
