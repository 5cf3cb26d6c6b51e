#if TANDEM_HAVE_CUDA
#include "engine/core/cudnn_ops.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "engine/core/cuda_check.hpp"
#include "kernels/cuda/bf16_convert.cuh"

// The descriptor API is marked deprecated in cuDNN 9 in favour of the graph API; it
// is still supported and covers what tandem needs with far less code.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace tandem {

namespace {

cudnnTensorDescriptor_t make_tensor(int n, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  cudnnTensorDescriptor_t d;
  TANDEM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  TANDEM_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, n, c, h, w));
  return d;
}

// Consecutive pieces of one workspace block, each 256-byte aligned (what cuDNN's
// tensor-core algorithms and the vector conversions want): their sizes in bytes are
// given once, the block asked for their sum, and piece<T>(i) is the i-th.
class Carve {
public:
  Carve(const std::function<void*(size_t)>& workspace, std::initializer_list<size_t> bytes) {
    TANDEM_CHECK(bytes.size() <= offsets_.size(), "a workspace carved in ", bytes.size(), " pieces (at most ",
                 offsets_.size(), ": a bug in tandem)");
    size_t total = 0, i = 0;
    for (size_t b : bytes) {
      offsets_[i++] = total;
      total += (b + 255) / 256 * 256;
    }
    base_ = static_cast<char*>(workspace(total));
    TANDEM_CHECK(reinterpret_cast<uintptr_t>(base_) % 256 == 0, "a convolution workspace at ",
                 static_cast<void*>(base_),
                 " is not 256-byte aligned (the memory pool hands out whole cudaMalloc blocks: a bug)");
  }
  template <typename T>
  T* piece(size_t i) const {
    return reinterpret_cast<T*>(base_ + offsets_[i]);
  }

private:
  char* base_ = nullptr;
  std::array<size_t, 5> offsets_{};  // no allocation: a convolution runs every step
};

// The first deterministic algorithm cuDNN's heuristics rank as working; the
// heuristics list the fastest first.
template <typename Perf, typename Algo>
Algo pick(const std::vector<Perf>& perf, int returned, Algo fallback, size_t* workspace, const char* what) {
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC) {
      *workspace = perf[i].memory;
      return perf[i].algo;
    }
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      *workspace = perf[i].memory;
      return perf[i].algo;
    }
  TANDEM_FAIL_HINT("try another precision (precision = 'tf32' or 'fp32') or device = 'cpu'", "cuDNN offers no working ",
                   what, " algorithm for this convolution");
  return fallback;
}

}  // namespace

struct CudnnOps::Conv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  size_t fwd_ws = 0, bwd_filter_ws = 0, bwd_data_ws = 0;
  ~Conv() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

struct CudnnOps::Pool {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  ~Pool() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
};

CudnnOps::CudnnOps(cudnnHandle_t handle, Precision precision, std::function<void*(size_t)> workspace)
    : handle_(handle), precision_(precision), workspace_(std::move(workspace)) {}

CudnnOps::~CudnnOps() = default;

CudnnOps::Conv& CudnnOps::conv(const ConvShape& s) {
  const auto key = std::make_tuple(s.batch, s.in_channels, s.height, s.width, s.out_channels, s.kernel, s.pad, s.stride);
  auto it = convs_.find(key);
  if (it != convs_.end()) return *it->second;
  auto c = std::make_unique<Conv>();
  // bf16: bfloat16 tensors and filter, float32 accumulation (PSEUDO_BFLOAT16_CONFIG).
  const bool bf16 = precision_ == Precision::bf16;
  const cudnnDataType_t data = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  c->x = make_tensor(s.batch, s.in_channels, s.height, s.width, data);
  c->y = make_tensor(s.batch, s.out_channels, s.out_h(), s.out_w(), data);
  TANDEM_CUDNN_CHECK(cudnnCreateFilterDescriptor(&c->w));
  TANDEM_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(c->w, data, CUDNN_TENSOR_NCHW, s.out_channels, s.in_channels, s.kernel, s.kernel));
  TANDEM_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c->conv));
  // Cross-correlation, as torch and tandem's CPU convolution compute it.
  TANDEM_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c->conv, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // FMA math keeps float32 exact to float32; tensor ops (TF32, or bfloat16's) only
  // when asked.
  TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(
      c->conv, precision_ == Precision::fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  int n, ch, oh, ow;
  TANDEM_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c->conv, c->x, c->w, &n, &ch, &oh, &ow));
  TANDEM_CHECK(n == s.batch && ch == s.out_channels && oh == s.out_h() && ow == s.out_w(),
               "cuDNN computes a ", n, "x", ch, "x", oh, "x", ow, " convolution output where tandem expects ", s.batch,
               "x", s.out_channels, "x", s.out_h(), "x", s.out_w());
  int returned = 0;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  TANDEM_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle_, c->x, c->w, c->conv, c->y,
                                                            static_cast<int>(fwd.size()), &returned, fwd.data()));
  c->fwd = pick(fwd, returned, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &c->fwd_ws, "forward");
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, c->x, c->y, c->conv, c->w,
                                                                   static_cast<int>(bf.size()), &returned, bf.data()));
  c->bwd_filter = pick(bf, returned, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &c->bwd_filter_ws, "filter-gradient");
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bd(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, c->w, c->y, c->conv, c->x,
                                                                 static_cast<int>(bd.size()), &returned, bd.data()));
  c->bwd_data = pick(bd, returned, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &c->bwd_data_ws, "data-gradient");
  // The heuristics' memory figure, checked against what each chosen algorithm asks
  // for with these descriptors: the larger is given.
  size_t need = 0;
  TANDEM_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle_, c->x, c->w, c->conv, c->y, c->fwd, &need));
  c->fwd_ws = std::max(c->fwd_ws, need);
  TANDEM_CUDNN_CHECK(
      cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, c->x, c->y, c->conv, c->w, c->bwd_filter, &need));
  c->bwd_filter_ws = std::max(c->bwd_filter_ws, need);
  TANDEM_CUDNN_CHECK(
      cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, c->w, c->y, c->conv, c->x, c->bwd_data, &need));
  c->bwd_data_ws = std::max(c->bwd_data_ws, need);
  return *convs_.emplace(key, std::move(c)).first->second;
}

cudaStream_t CudnnOps::stream() const {
  cudaStream_t stream = nullptr;
  TANDEM_CUDNN_CHECK(cudnnGetStream(handle_, &stream));
  return stream;
}

void CudnnOps::conv_forward(const ConvShape& s, const float* x, const float* w, float* y) {
  if (s.batch == 0) return;  // cuDNN rejects empty tensors; nothing to compute
  Conv& c = conv(s);
  const float one = 1.0f, zero = 0.0f;
  if (precision_ != Precision::bf16) {
    void* ws = workspace_(c.fwd_ws);
    TANDEM_CUDNN_CHECK(
        cudnnConvolutionForward(handle_, &one, c.x, x, c.w, w, c.conv, c.fwd, ws, c.fwd_ws, &zero, c.y, y));
    return;
  }
  // bf16: x and W converted, the bfloat16 y widened; all in one workspace block.
  const size_t xs = s.x_size(), wsz = s.w_size(), ys = s.y_size();
  const Carve carve(workspace_, {c.fwd_ws, 2 * xs, 2 * wsz, 2 * ys});
  void* ws = carve.piece<char>(0);
  uint16_t* x16 = carve.piece<uint16_t>(1);
  uint16_t* w16 = carve.piece<uint16_t>(2);
  uint16_t* y16 = carve.piece<uint16_t>(3);
  const cudaStream_t st = stream();
  cuda::to_bf16(x, x16, xs, st);
  cuda::to_bf16(w, w16, wsz, st);
  TANDEM_CUDNN_CHECK(
      cudnnConvolutionForward(handle_, &one, c.x, x16, c.w, w16, c.conv, c.fwd, ws, c.fwd_ws, &zero, c.y, y16));
  cuda::from_bf16(y16, y, ys, st);
}

void CudnnOps::conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dw,
                             float* dx) {
  if (s.batch == 0) {
    // No samples: a zero weight gradient (this worker's share of the sum).
    TANDEM_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(float) * s.w_size(), stream()));
    return;
  }
  Conv& c = conv(s);
  if (precision_ == Precision::bf16) {
    conv_backward_bf16(s, c, x, w, dy, dw, dx);
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  void* ws = workspace_(c.bwd_filter_ws);
  TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &one, c.x, x, c.y, dy, c.conv, c.bwd_filter, ws,
                                                    c.bwd_filter_ws, &zero, c.w, dw));
  if (!dx) return;
  ws = workspace_(c.bwd_data_ws);
  TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, c.w, w, c.y, dy, c.conv, c.bwd_data, ws,
                                                  c.bwd_data_ws, &zero, c.x, dx));
}

// As conv_backward, with x, W and dy converted to bfloat16 and dW, dx widened.
void CudnnOps::conv_backward_bf16(const ConvShape& s, Conv& c, const float* x, const float* w, const float* dy,
                                  float* dw, float* dx) {
  const float one = 1.0f, zero = 0.0f;
  const size_t xs = s.x_size(), wsz = s.w_size(), ys = s.y_size();
  const size_t ws_bytes = std::max(c.bwd_filter_ws, dx ? c.bwd_data_ws : size_t{0});
  // x16 is the data gradient's room too: x is not read after the filter gradient.
  const Carve carve(workspace_, {ws_bytes, 2 * xs, 2 * wsz, 2 * wsz, 2 * ys});
  void* ws = carve.piece<char>(0);
  uint16_t* x16 = carve.piece<uint16_t>(1);
  uint16_t* w16 = carve.piece<uint16_t>(2);
  uint16_t* dw16 = carve.piece<uint16_t>(3);
  uint16_t* dy16 = carve.piece<uint16_t>(4);
  const cudaStream_t st = stream();
  cuda::to_bf16(x, x16, xs, st);
  cuda::to_bf16(dy, dy16, ys, st);
  TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &one, c.x, x16, c.y, dy16, c.conv, c.bwd_filter, ws,
                                                    c.bwd_filter_ws, &zero, c.w, dw16));
  cuda::from_bf16(dw16, dw, wsz, st);
  if (!dx) return;
  cuda::to_bf16(w, w16, wsz, st);
  uint16_t* dx16 = x16;
  TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, c.w, w16, c.y, dy16, c.conv, c.bwd_data, ws,
                                                  c.bwd_data_ws, &zero, c.x, dx16));
  cuda::from_bf16(dx16, dx, xs, st);
}

CudnnOps::Pool& CudnnOps::pool(int batch, int channels, int height, int width, int k, int stride) {
  const auto key = std::make_tuple(batch, channels, height, width, k, stride);
  auto it = pools_.find(key);
  if (it != pools_.end()) return *it->second;
  auto p = std::make_unique<Pool>();
  p->x = make_tensor(batch, channels, height, width);
  p->y = make_tensor(batch, channels, (height - k) / stride + 1, (width - k) / stride + 1);
  TANDEM_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&p->pool));
  // The deterministic max: ties route the gradient to one input, as on the CPU.
  TANDEM_CUDNN_CHECK(cudnnSetPooling2dDescriptor(p->pool, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_NOT_PROPAGATE_NAN, k,
                                                 k, 0, 0, stride, stride));
  return *pools_.emplace(key, std::move(p)).first->second;
}

void CudnnOps::maxpool_forward(const float* x, int batch, int channels, int height, int width, int k, int stride,
                               float* y) {
  if (batch == 0) return;
  Pool& p = pool(batch, channels, height, width, k, stride);
  const float one = 1.0f, zero = 0.0f;
  TANDEM_CUDNN_CHECK(cudnnPoolingForward(handle_, p.pool, &one, p.x, x, &zero, p.y, y));
}

void CudnnOps::maxpool_backward(const float* x, const float* y, const float* dy, int batch, int channels, int height,
                                int width, int k, int stride, float* dx) {
  if (batch == 0) return;
  Pool& p = pool(batch, channels, height, width, k, stride);
  const float one = 1.0f, zero = 0.0f;
  TANDEM_CUDNN_CHECK(cudnnPoolingBackward(handle_, p.pool, &one, p.y, y, p.y, dy, p.x, x, &zero, p.x, dx));
}

}  // namespace tandem
#endif
