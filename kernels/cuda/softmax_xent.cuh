#pragma once
// Softmax cross-entropy (SUM over rows) fused with its gradient and the accuracy
// count (kernels/cpu/softmax_xent.hpp). labels live in device memory. totals is a
// device buffer of 2 doubles, overwritten (added to, with `accumulate`: micro-batches
// and evaluation batches sum on the device): [0] the loss sum, [1] the number of rows
// whose arg-max equals the label. dlogits may be null (evaluation), or logits itself
// (in place). Deterministic. The device cannot raise an error: a label outside
// [0, classes) counts as wrong and makes totals[0] NaN (check labels on the host, as
// the CPU reference does, to get a message). Rows are `ld` floats apart (0:
// `classes`); columns from `classes` to `ld` (a padded vocabulary's) are never
// predicted and their gradient is 0.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::cuda {

void softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits, double* totals,
                  cudaStream_t stream, bool accumulate = false, int ld = 0);

}  // namespace tandem::cuda
