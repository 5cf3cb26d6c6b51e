#pragma once
// A batch gathered on the device from a table of byte rows held there
// (kernels/byte_rows.hpp; kernels/cpu/gather_rows.hpp has the reference). Every
// pointer is device memory. The device cannot raise an error: the caller keeps
// indices in [0, t.rows).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/byte_rows.hpp"

namespace tandem::cuda {

void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x, int32_t* labels,
                      cudaStream_t stream);

}  // namespace tandem::cuda
