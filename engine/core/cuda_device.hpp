#pragma once
// The CUDA device: one GPU behind the Device interface. Each worker (rank) owns one,
// with its own stream, so ops queue and the host runs ahead until it needs a number
// back. Memory comes from a caching pool (no cudaMalloc in a steady-state step),
// input batches go through pinned host buffers and a second stream (the copy engine
// overlaps them with compute), GEMMs go to cuBLAS, convolution and pooling to cuDNN,
// and everything else to tandem's kernels under kernels/cuda.
//
// Built without CUDA, make_cuda_device fails with a message saying so.
#include <memory>
#include <string>

#include "engine/core/device.hpp"

namespace tandem {

struct CudaOptions {
  int ordinal = 0;     // which GPU of this host
  Precision precision = Precision::fp32;  // what GEMMs and convolutions compute in (precision.hpp)
};

std::unique_ptr<Device> make_cuda_device(const CudaOptions& options);

// The CUDA stream a CUDA device queues its work on (as void*, so callers need no
// CUDA headers): NCCL all-reduces go on it to order after the backward pass.
void* cuda_stream_of(Device& device);
// The GPU ordinal of a CUDA device.
int cuda_ordinal_of(Device& device);

}  // namespace tandem
