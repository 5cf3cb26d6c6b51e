#pragma once
// A batch gathered by index from a table of byte rows (kernels/byte_rows.hpp):
// x[i, j] = t.table[t.samples[indices[i] * t.sample_stride + j]] and
// labels[i * t.label_bytes + k] = t.labels[indices[i] * t.label_stride + k]. The
// same lookup a data set's own gather() makes, so a batch is bit for bit the same
// whichever way it was gathered. Indices must lie in [0, t.rows) (checked here; the
// GPU kernel cannot check, its callers do).
#include <cstdint>

#include "kernels/byte_rows.hpp"

namespace tandem::cpu {

void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x, int32_t* labels);

}  // namespace tandem::cpu
