#pragma once
// Inverted dropout with the counter-based mask of kernels/cpu/dropout.hpp: the same
// hash, so a sample gets bitwise the same mask on either device.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dropout_seed.hpp"

namespace tandem::cuda {

void dropout_forward(const float* x, float* y, int rows, int cols, float p, uint64_t seed, int64_t first_row,
                     cudaStream_t stream);
void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, uint64_t seed, int64_t first_row,
                      cudaStream_t stream);
// The same with the key mixed on the device from an iteration seed in device memory
// (seed.on_device: kernels/dropout_seed.hpp), as a captured step needs.
void dropout_forward(const float* x, float* y, int rows, int cols, float p, const DropoutSeed& seed,
                     int64_t first_row, cudaStream_t stream);
void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, const DropoutSeed& seed,
                      int64_t first_row, cudaStream_t stream);

}  // namespace tandem::cuda
