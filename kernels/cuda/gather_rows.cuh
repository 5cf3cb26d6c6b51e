#pragma once
// A batch gathered on the device from a data set held there as rows of bytes
// (kernels/cpu/gather_rows.hpp has the reference): x[i, j] = table[samples[indices[i]
// * sample_bytes + j]], labels[i * label_bytes + k] = label_rows[indices[i] *
// label_bytes + k]. Every pointer is device memory. The device cannot raise an
// error: the caller keeps indices in [0, rows).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

void gather_byte_rows(const uint8_t* samples, int64_t sample_bytes, const uint8_t* label_rows, int64_t label_bytes,
                      const float* table, const int64_t* indices, int64_t count, float* x, int32_t* labels,
                      cudaStream_t stream);

}  // namespace tandem::cuda
