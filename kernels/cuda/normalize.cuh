#pragma once
// Data normalisation on the device: raw 8-bit pixels in, y = x * scale + shift out
// (for Fashion-MNIST scale = 1 / (255 std), shift = -mean / std). Copying bytes and
// normalising on the GPU moves a quarter of the data over PCIe.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tandem::cuda {

void normalize_u8(const uint8_t* x, float* y, size_t count, float scale, float shift, cudaStream_t stream);

}  // namespace tandem::cuda
