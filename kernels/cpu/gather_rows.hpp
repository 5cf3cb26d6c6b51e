#pragma once
// A batch gathered by index from a data set held as rows of bytes
// (Dataset::ByteRows): x[i, j] = table[samples[indices[i] * sample_bytes + j]] and
// labels[i * label_bytes + k] = label_rows[indices[i] * label_bytes + k]. The same
// lookup the data set's own gather() makes, so a batch is bit for bit the same
// whichever way it was gathered. `rows` bounds the indices (checked here; the GPU
// kernel cannot check, its callers do).
#include <cstdint>

namespace tandem::cpu {

void gather_byte_rows(const uint8_t* samples, int64_t sample_bytes, const uint8_t* label_rows, int64_t label_bytes,
                      const float* table, int64_t rows, const int64_t* indices, int64_t count, float* x,
                      int32_t* labels);

}  // namespace tandem::cpu
