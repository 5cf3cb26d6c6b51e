#pragma once
// Convolution and max pooling through cuDNN (its legacy, descriptor-based API: still
// supported in cuDNN 9 and enough for NCHW float32). Descriptors and algorithm
// choices are cached per shape; the local batch changes under a balancing policy,
// so a shape is (batch, layer geometry), and a handful of batches recur. Algorithms
// come from cuDNN's heuristics (no benchmarking at run time, so the first step of a
// new batch size costs microseconds, not a search), restricted to deterministic ones
// so a run repeats bit for bit.
//
// Precision (precision.hpp): fp32 holds cuDNN to FMA math, tf32 allows TF32 tensor
// cores. bf16 runs cuDNN's bfloat16 convolutions (PSEUDO_BFLOAT16_CONFIG: bfloat16
// tensors, float32 accumulation): the float32 operands are converted into bfloat16
// copies in the workspace and the bfloat16 result is widened into the float32 output,
// so the layers see float32 as in every mode.
#if TANDEM_HAVE_CUDA
#include <cudnn.h>

#include <functional>
#include <map>
#include <memory>
#include <tuple>

#include "engine/core/device.hpp"
#include "engine/core/precision.hpp"

namespace tandem {

class CudnnOps {
public:
  // workspace(bytes) returns device scratch of at least that size, valid until the next call.
  CudnnOps(cudnnHandle_t handle, Precision precision, std::function<void*(size_t)> workspace);
  ~CudnnOps();
  CudnnOps(const CudnnOps&) = delete;
  CudnnOps& operator=(const CudnnOps&) = delete;

  void conv_forward(const ConvShape& s, const float* x, const float* w, float* y);
  void conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dw, float* dx);
  void maxpool_forward(const float* x, int batch, int channels, int height, int width, int k, int stride, float* y);
  void maxpool_backward(const float* x, const float* y, const float* dy, int batch, int channels, int height,
                        int width, int k, int stride, float* dx);

private:
  struct Conv;
  struct Pool;
  Conv& conv(const ConvShape& s);
  Pool& pool(int batch, int channels, int height, int width, int k, int stride);
  cudaStream_t stream() const;
  void conv_backward_bf16(const ConvShape& s, Conv& c, const float* x, const float* w, const float* dy, float* dw,
                          float* dx);

  cudnnHandle_t handle_;
  Precision precision_;
  std::function<void*(size_t)> workspace_;
  std::map<std::tuple<int, int, int, int, int, int, int, int>, std::unique_ptr<Conv>> convs_;
  std::map<std::tuple<int, int, int, int, int, int>, std::unique_ptr<Pool>> pools_;
};

}  // namespace tandem
#endif
