#include "engine/core/cuda_device.hpp"

#include "engine/core/error.hpp"

#if TANDEM_HAVE_CUDA
#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "engine/core/cuda_check.hpp"
#include "engine/core/cudnn_ops.hpp"
#include "engine/core/gemm_layout.hpp"
#include "engine/core/memory_pool.hpp"
#include "kernels/cuda/adamw_step.cuh"
#include "kernels/cuda/avgpool.cuh"
#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/bias_act.cuh"
#include "kernels/cuda/bias_grad.cuh"
#include "kernels/cuda/causal_softmax.cuh"
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/heads_permute.cuh"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/normalize.cuh"
#include "kernels/cuda/sgd_step.cuh"
#include "kernels/cuda/step_rule.cuh"
#include "kernels/cuda/softmax_xent.cuh"
#include "kernels/cpu/gemm.hpp"

namespace tandem {

namespace {

// Device scratch that grows to the largest request and is reused: the byte batch,
// sums, cuDNN workspaces. Grows through the pool, so the old block is
// reused by someone else rather than returned to the driver.
class Scratch {
public:
  explicit Scratch(MemoryPool& pool) : pool_(pool) {}
  ~Scratch() { pool_.deallocate(p_); }
  void* get(size_t bytes, cudaStream_t stream) {
    if (bytes <= bytes_) return p_;
    // Work queued on the stream may still read the old block: let it finish first.
    if (p_) {
      TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
      pool_.deallocate(p_);
    }
    p_ = pool_.allocate(bytes);
    if (!p_) TANDEM_FAIL_HINT("reduce the local batch or the model", "out of GPU memory for ", bytes, " bytes of scratch");
    bytes_ = MemoryPool::size_class(bytes);
    return p_;
  }

private:
  MemoryPool& pool_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

class CudaDevice final : public Device {
public:
  explicit CudaDevice(const CudaOptions& o)
      : ordinal_(o.ordinal),
        bf16_gemms_(o.precision == Precision::bf16),
        pool_([](size_t bytes) -> void* {
                void* p = nullptr;
                if (cudaMalloc(&p, bytes) != cudaSuccess) {
                  (void)cudaGetLastError();  // clear the sticky-free error so the pool may retry
                  return nullptr;
                }
                return p;
              },
              [](void* p) { cudaFree(p); }),
        bytes_(pool_), sums_(pool_), workspace_(pool_) {
    TANDEM_CUDA_CHECK(cudaSetDevice(ordinal_));
    cudaDeviceProp prop{};
    TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
    name_ = "cuda:" + std::to_string(ordinal_) + " (" + prop.name + ")";
    capacity_ = prop.totalGlobalMem;
    TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
    TANDEM_CUBLAS_CHECK(cublasCreate(&blas_));
    TANDEM_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    // A workspace of cuBLAS's own size for Hopper, given once: a captured step's
    // GEMMs then use memory that outlives every graph, and cuBLAS allocates nothing
    // during a capture.
    blas_workspace_ = pool_.allocate(kBlasWorkspace);
    if (!blas_workspace_)
      TANDEM_FAIL_HINT("free memory on the GPU", "out of GPU memory for cuBLAS's ", kBlasWorkspace, " byte workspace");
    TANDEM_CUBLAS_CHECK(cublasSetWorkspace(blas_, blas_workspace_, kBlasWorkspace));
    norm_ = static_cast<float*>(pool_.allocate(sizeof(float)));
    if (!norm_) TANDEM_FAIL_HINT("free memory on the GPU", "out of GPU memory for 4 bytes");
    // Pedantic float32 unless the experiment allows tensor cores (precision.hpp). In
    // bf16 the handle's default math lets the GEMMs' explicit compute type
    // (CUBLAS_COMPUTE_32F_FAST_16BF) take effect; pedantic math would override it.
    TANDEM_CUBLAS_CHECK(cublasSetMathMode(blas_, o.precision == Precision::fp32   ? CUBLAS_PEDANTIC_MATH
                                                 : o.precision == Precision::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                                  : CUBLAS_DEFAULT_MATH));
    TANDEM_CUDNN_CHECK(cudnnCreate(&dnn_));
    TANDEM_CUDNN_CHECK(cudnnSetStream(dnn_, stream_));
    // Convolutions: TF32 tensor cores in tf32, bfloat16 ones in bf16 (precision.hpp).
    cudnn_ = std::make_unique<CudnnOps>(dnn_, o.precision,
                                        [this](size_t b) { return workspace_.get(b, stream_); });
  }

  ~CudaDevice() override {
    // Nothing may throw here: report what fails and go on releasing.
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
    abort_capture();
    for (auto& [id, exec] : graphs_) cudaGraphExecDestroy(exec);
    cudnn_.reset();
    cudnnDestroy(dnn_);
    cublasDestroy(blas_);
    pool_.deallocate(blas_workspace_);
    pool_.deallocate(norm_);
    if (read_buffer_) cudaFreeHost(read_buffer_);
    if (later_host_) {
      cudaFreeHost(later_host_);
      for (cudaEvent_t e : later_events_) cudaEventDestroy(e);
    }
    cudaEventDestroy(uploaded_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
  }

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string name() const override { return name_; }
  // cuBLAS has no thread count; the host BLAS does, and a GPU rank still computes on
  // the host (the CPU device's ops it calls, a parameter server's updates), sharing
  // the host's cores with the other ranks.
  void set_blas_threads(int threads) override { cpu::set_blas_threads(threads); }
  cudaStream_t stream() const { return stream_; }
  int ordinal() const { return ordinal_; }

  float* allocate(size_t count) override {
    void* p = pool_.allocate(std::max<size_t>(count, 1) * sizeof(float));
    if (!p && capturing_)
      TANDEM_FAIL("an allocation of ", count * sizeof(float), " bytes on ", name_,
                  " during a graph capture, which the memory pool's cache could not serve (the step is then run op "
                  "by op)");
    if (!p)
      TANDEM_FAIL_HINT("reduce the local batch (policy.max_batch caps it per worker) or the model",
                       "out of GPU memory on ", name_, " allocating ", count * sizeof(float), " bytes (",
                       pool_.bytes_in_use(), " bytes in use)");
    return static_cast<float*>(p);
  }
  void deallocate(float* p, size_t) override { pool_.deallocate(p); }
  size_t bytes_in_use() const override { return pool_.bytes_in_use(); }

  void copy_from_host(float* dst, const float* src, size_t count) override {
    if (!count) return;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
    // From pageable memory the call returns once the source is staged; from pinned
    // memory it returns at once, and the caller may reuse src on return: wait.
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, src) == cudaSuccess && attr.type == cudaMemoryTypeHost)
      TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    else
      (void)cudaGetLastError();
  }
  void copy_to_host(float* dst, const float* src, size_t count) override {
    if (!count) return;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(float* dst, const float* src, size_t count) override {
    if (count && dst != src)
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  void fill(float* dst, size_t count, float value) override {
    if (value == 0.0f) {
      if (count) TANDEM_CUDA_CHECK(cudaMemsetAsync(dst, 0, count * sizeof(float), stream_));
    } else {
      cuda::fill(dst, count, value, stream_);
    }
  }
  void synchronize() override { TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void copy_bytes_from_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  size_t memory_capacity() const override { return capacity_; }
  size_t memory_free() const override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();  // unknown: not an error to blame on a later launch
      return 0;
    }
    return free;
  }
  void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x,
                        int32_t* labels) override {
    cuda::gather_byte_rows(t, indices, count, x, labels, stream_);
  }

  void* allocate_host(size_t bytes) override {
    void* p = nullptr;
    TANDEM_CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
    return p;
  }
  void deallocate_host(void* p, size_t) override {
    // The copy engine may still read it.
    cudaStreamSynchronize(copy_stream_);
    cudaFreeHost(p);
  }
  void upload(float* dst, const float* src, size_t count) override {
    if (!count) return;
    // The copy stream must not start before compute that still reads dst is done.
    TANDEM_CUDA_CHECK(cudaEventRecord(uploaded_, stream_));
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, uploaded_, 0));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyHostToDevice, copy_stream_));
    TANDEM_CUDA_CHECK(cudaEventRecord(uploaded_, copy_stream_));
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(stream_, uploaded_, 0));
  }
  void upload_normalized(float* dst, const uint8_t* src, size_t count, float scale, float shift) override {
    if (!count) return;
    auto* raw = static_cast<uint8_t*>(bytes_.get(count, stream_));
    TANDEM_CUDA_CHECK(cudaEventRecord(uploaded_, stream_));
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, uploaded_, 0));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(raw, src, count, cudaMemcpyHostToDevice, copy_stream_));
    TANDEM_CUDA_CHECK(cudaEventRecord(uploaded_, copy_stream_));
    TANDEM_CUDA_CHECK(cudaStreamWaitEvent(stream_, uploaded_, 0));
    cuda::normalize_u8(raw, dst, count, scale, shift, stream_);
  }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc) override {
    TANDEM_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: m ", m, ", n ", n, ", k ", k, " must not be negative");
    if (m == 0 || n == 0) return;
    const ColumnMajorGemm g = to_column_major(ta, tb, m, n, k, a, lda, b, ldb);
    const cublasOperation_t op1 = blas_op(g.trans_first), op2 = blas_op(g.trans_second);
    if (bf16_gemms_) {
      // Float32 in and out, the products on bfloat16 tensor cores, accumulated in float32.
      TANDEM_CUBLAS_CHECK(cublasGemmEx(blas_, op1, op2, g.m, g.n, g.k, &alpha, g.first, CUDA_R_32F,
                                       blas_ld(g.ld_first), g.second, CUDA_R_32F, blas_ld(g.ld_second), &beta, c,
                                       CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
      return;
    }
    TANDEM_CUBLAS_CHECK(cublasSgemm(blas_, op1, op2, g.m, g.n, g.k, &alpha, g.first, blas_ld(g.ld_first), g.second,
                                    blas_ld(g.ld_second), &beta, c, ldc));
  }

  // count products; the column-major swap (gemm_layout.hpp) swaps the operands, and
  // with them their batch strides: A's stride goes with A, now cuBLAS's second operand.
  void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, int64_t stride_a,
                    const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc, int64_t stride_c,
                    int count) override {
    TANDEM_CHECK(m >= 0 && n >= 0 && k >= 0 && count >= 0, "gemm_batched: m ", m, ", n ", n, ", k ", k, ", count ",
                 count, " must not be negative");
    if (count == 0 || m == 0 || n == 0) return;
    const ColumnMajorGemm g = to_column_major(ta, tb, m, n, k, a, lda, b, ldb);
    const cublasOperation_t op1 = blas_op(g.trans_first), op2 = blas_op(g.trans_second);
    if (bf16_gemms_) {
      TANDEM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          blas_, op1, op2, g.m, g.n, g.k, &alpha, g.first, CUDA_R_32F, blas_ld(g.ld_first), stride_b, g.second,
          CUDA_R_32F, blas_ld(g.ld_second), stride_a, &beta, c, CUDA_R_32F, ldc, stride_c, count,
          CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
      return;
    }
    TANDEM_CUBLAS_CHECK(cublasSgemmStridedBatched(
        blas_, op1, op2, g.m, g.n, g.k, &alpha, g.first, blas_ld(g.ld_first), stride_b, g.second,
        blas_ld(g.ld_second), stride_a, &beta, c, ldc, stride_c, count));
  }

  void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act) override {
    cuda::bias_act_forward(y, bias, rows, cols, act, stream_);
  }
  void act_backward(const float* y, float* dy, size_t count, Activation act) override {
    cuda::act_backward(y, dy, count, act, stream_);
  }
  void bias_grad(const float* dy, int rows, int cols, float* db) override {
    cuda::bias_grad(dy, rows, cols, db, stream_);
  }
  void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial,
                                Activation act) override {
    cuda::channel_bias_act_forward(y, bias, batch, channels, spatial, act, stream_);
  }
  void channel_bias_grad(const float* dy, int batch, int channels, int spatial, float* db) override {
    cuda::channel_bias_grad(dy, batch, channels, spatial, db, stream_);
  }

  void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y) override {
    cudnn_->conv_forward(s, x, w, y);
  }
  void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dw,
                       float* dx) override {
    cudnn_->conv_backward(s, x, w, dy, dw, dx);
  }
  void maxpool_forward(const float* x, int n, int c, int h, int w, int k, int stride, float* y, int32_t*) override {
    cudnn_->maxpool_forward(x, n, c, h, w, k, stride, y);
  }
  void maxpool_backward(const float* x, const float* y, const float* dy, const int32_t*, int n, int c, int h, int w,
                        int k, int stride, float* dx) override {
    cudnn_->maxpool_backward(x, y, dy, n, c, h, w, k, stride, dx);
  }

  // A seed in device memory is mixed by the kernel; a value, on the host.
  void dropout_forward(const float* x, float* y, int rows, int cols, float p, const DropoutSeed& seed,
                       int64_t first_row) override {
    if (seed.on_device)
      cuda::dropout_forward(x, y, rows, cols, p, seed, first_row, stream_);
    else
      cuda::dropout_forward(x, y, rows, cols, p, dropout_key(seed.iteration, seed), first_row, stream_);
  }
  void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, const DropoutSeed& seed,
                        int64_t first_row) override {
    if (seed.on_device)
      cuda::dropout_backward(dy, dx, rows, cols, p, seed, first_row, stream_);
    else
      cuda::dropout_backward(dy, dx, rows, cols, p, dropout_key(seed.iteration, seed), first_row, stream_);
  }
  void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y) override {
    cuda::global_avgpool_forward(x, batch, channels, spatial, y, stream_);
  }
  void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx) override {
    cuda::global_avgpool_backward(dy, batch, channels, spatial, dx, stream_);
  }
  void add_relu(const float* a, const float* b, float* y, size_t count) override {
    cuda::add_relu(a, b, y, count, stream_);
  }
  void add(const float* a, const float* b, float* y, size_t count) override { cuda::add(a, b, y, count, stream_); }

  void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums) override {
    auto* d = static_cast<double*>(sums_.get(2 * sizeof(double) * static_cast<size_t>(channels), stream_));
    cuda::batchnorm_sums(x, batch, channels, spatial, d, stream_);
    read_doubles(sums, d, 2 * channels);
  }
  void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma,
                         const float* beta, int batch, int channels, int spatial, float* xhat, float* y) override {
    cuda::batchnorm_forward(x, mean, invstd, gamma, beta, batch, channels, spatial, xhat, y, stream_);
  }
  void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial,
                               double* sums) override {
    auto* d = static_cast<double*>(sums_.get(2 * sizeof(double) * static_cast<size_t>(channels), stream_));
    cuda::batchnorm_backward_sums(dy, xhat, batch, channels, spatial, d, stream_);
    read_doubles(sums, d, 2 * channels);
  }
  void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                          const double* sums, double count, int batch, int channels, int spatial,
                          float* dx) override {
    const size_t bytes = 2 * sizeof(double) * static_cast<size_t>(channels);
    auto* d = static_cast<double*>(sums_.get(bytes, stream_));
    // sums is pageable host memory (the layer's): the copy is staged before return.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(d, sums, bytes, cudaMemcpyHostToDevice, stream_));
    cuda::batchnorm_backward(dy, xhat, gamma, invstd, d, count, batch, channels, spatial, dx, stream_);
  }

  void softmax_xent_into(const float* logits, const int32_t* labels, int rows, int classes, int ld, float* dlogits,
                         double* totals, bool accumulate) override {
    // labels are device memory, checked where they were made (DeviceInput): a label
    // outside [0, classes) would only count as wrong here and make the loss NaN.
    cuda::softmax_xent(logits, labels, rows, classes, dlogits, totals, stream_, accumulate, ld);
  }

  double sum_squares(const float* x, size_t count) override {
    if (count == 0) return 0.0;
    // cuBLAS's norm (a scaled, overflow-safe sum); the result comes to the host.
    float norm = 0.0f;
    TANDEM_CUBLAS_CHECK(cublasSnrm2(blas_, static_cast<int>(count), x, 1, &norm));
    return static_cast<double>(norm) * norm;
  }
  void sum_squares_into(const float* x, size_t count, double* out) override {
    if (count == 0) {
      const double zero = 0.0;
      cuda::write_doubles(out, &zero, 1, stream_);
      return;
    }
    // The same norm as sum_squares, left in device memory and squared there.
    TANDEM_CUBLAS_CHECK(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_DEVICE));
    const cublasStatus_t st = cublasSnrm2(blas_, static_cast<int>(count), x, 1, norm_);
    TANDEM_CUBLAS_CHECK(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
    TANDEM_CUBLAS_CHECK(st);
    cuda::square_norm(norm_, out, stream_);
  }
  void decide_step(double* step, const double* totals, const StepRule& rule) override {
    cuda::decide_step(step, totals, rule, stream_);
  }
  void write_doubles(double* dst, const double* src, int count) override {
    cuda::write_doubles(dst, src, count, stream_);
  }
  // Through pinned memory: a copy to pageable memory is staged by the driver, which
  // costs a fused step's one read a few microseconds more.
  void read_doubles(double* dst, const double* src, int count) override {
    if (count <= 0) return;
    const size_t bytes = static_cast<size_t>(count) * sizeof(double);
    if (bytes > read_bytes_) {
      if (read_buffer_) TANDEM_CUDA_CHECK(cudaFreeHost(read_buffer_));
      read_buffer_ = nullptr;
      read_bytes_ = 0;
      TANDEM_CUDA_CHECK(cudaMallocHost(&read_buffer_, bytes));
      read_bytes_ = bytes;
    }
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(read_buffer_, src, bytes, cudaMemcpyDeviceToHost, stream_));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(dst, read_buffer_, bytes);
  }
  // Into a pinned slot behind an event: collect() waits for that event alone, so the
  // host may queue the next step before it reads this one.
  int read_doubles_later(const double* src, int count) override {
    TANDEM_CHECK(count >= 0 && count <= kMaxWrite, "read_doubles_later of ", count, " values (at most ", kMaxWrite,
                 ")");
    if (!later_host_) {
      void* host = nullptr;
      TANDEM_CUDA_CHECK(cudaMallocHost(&host, sizeof(double) * kMaxWrite * kLaterReads));
      later_host_ = static_cast<double*>(host);
      for (cudaEvent_t& e : later_events_) TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    const int ticket = later_turn_;
    later_turn_ = (later_turn_ + 1) % kLaterReads;
    later_counts_[ticket] = count;
    if (count > 0)
      TANDEM_CUDA_CHECK(cudaMemcpyAsync(later_host_ + ticket * kMaxWrite, src, sizeof(double) * count,
                                        cudaMemcpyDeviceToHost, stream_));
    TANDEM_CUDA_CHECK(cudaEventRecord(later_events_[ticket], stream_));
    return ticket;
  }
  void collect(int ticket, double* dst) override {
    TANDEM_CHECK(ticket >= 0 && ticket < kLaterReads && later_host_, "collect of ticket ", ticket, " (a bug in tandem)");
    TANDEM_CUDA_CHECK(cudaEventSynchronize(later_events_[ticket]));
    std::memcpy(dst, later_host_ + ticket * kMaxWrite, sizeof(double) * later_counts_[ticket]);
  }
  void sgd_step(float* param, const float* grad, float* velocity, size_t count, const double* step, float momentum,
                float weight_decay, bool nesterov) override {
    cuda::sgd_step(param, grad, velocity, count, step, momentum, weight_decay, nesterov, stream_);
  }

  void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq, int dim,
                         int vocab, float* y) override {
    cuda::embedding_forward(tokens, wte, wpe, batch, seq, dim, vocab, y, stream_);
  }
  void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab, float* dwte,
                          float* dwpe) override {
    cuda::embedding_backward(tokens, dy, batch, seq, dim, vocab, dwte, dwpe, stream_);
  }
  void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim, float eps,
                         float* y, float* mean, float* rstd) override {
    cuda::layernorm_forward(x, gamma, beta, rows, dim, eps, y, mean, rstd, stream_);
  }
  void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                          int rows, int dim, float* dx, float* dgamma, float* dbeta) override {
    cuda::layernorm_backward(dy, x, gamma, mean, rstd, rows, dim, dx, dgamma, dbeta, stream_);
  }
  void gelu_forward(const float* x, float* y, size_t count) override { cuda::gelu_forward(x, y, count, stream_); }
  void gelu_backward(const float* x, const float* dy, float* dx, size_t count) override {
    cuda::gelu_backward(x, dy, dx, count, stream_);
  }
  void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale) override {
    cuda::causal_softmax_forward(scores, att, mats, seq, scale, stream_);
  }
  void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq,
                               float scale) override {
    cuda::causal_softmax_backward(att, datt, dscores, mats, seq, scale, stream_);
  }
  void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads, int head_dim,
                     bool to_heads) override {
    cuda::heads_permute(seq_layout, head_layout, batch, seq, parts, heads, head_dim, to_heads, stream_);
  }
  // y = y + x: the add kernel allows its output to be an input.
  void add_inplace(float* y, const float* x, size_t count) override { cuda::add(y, x, y, count, stream_); }
  void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, const double* step, float beta1,
                  float beta2, float eps, float weight_decay) override {
    cuda::adamw_step(param, grad, m, v, count, step, beta1, beta2, eps, weight_decay, stream_);
  }

  // Graph capture on the compute stream. Thread-local mode: an op of this thread
  // that cannot be captured (a synchronize, a cudaMalloc) fails the capture, which
  // the caller then aborts; other threads (policies, the console) are not concerned.
  bool can_capture() const override { return true; }
  void begin_capture() override {
    TANDEM_CHECK(!capturing_, "begin_capture on ", name_, " while a capture is under way (a bug in tandem)");
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    // cudaMalloc and cudaFree are illegal in a capture: a block the cache lacks fails
    // the allocation at once (and the capture), without emptying the cache.
    pool_.set_raw_calls(false);
  }
  int end_capture() override {
    TANDEM_CHECK(capturing_, "end_capture on ", name_, " with no capture under way (a bug in tandem)");
    capturing_ = false;
    pool_.set_raw_calls(true);
    cudaGraph_t graph = nullptr;
    TANDEM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TANDEM_CUDA_CHECK(err);
    graphs_[next_graph_] = exec;
    return next_graph_++;
  }
  void abort_capture() override {
    if (!capturing_) return;
    capturing_ = false;
    pool_.set_raw_calls(true);
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(stream_, &graph);  // reports the capture's failure: the caller has it
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
  }
  void replay(int graph) override {
    const auto it = graphs_.find(graph);
    TANDEM_CHECK(it != graphs_.end(), "replay of graph ", graph, ", which ", name_, " does not hold (a bug in tandem)");
    TANDEM_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
  }
  void drop_graph(int graph) override {
    const auto it = graphs_.find(graph);
    if (it == graphs_.end()) return;
    // A launch still running keeps its graph alive: destroying the executable is safe.
    // Not checked: after a fault every call fails, and this runs from destructors.
    (void)cudaGraphExecDestroy(it->second);
    (void)cudaGetLastError();
    graphs_.erase(it);
  }
  uint64_t memory_epoch() const override { return pool_.events(); }

private:
  // cuBLAS refuses a leading dimension below 1 even where the operand is empty (k = 0:
  // a row-major m x 0 operand has ld 0), where BLAS computes C = beta * C: any ld >= 1
  // is then valid, as nothing is read (torch clamps the same way).
  static int blas_ld(int ld) { return std::max(ld, 1); }
  static cublasOperation_t blas_op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

  int ordinal_;
  bool bf16_gemms_;  // GEMMs on bfloat16 tensor cores (precision bf16)
  std::string name_;
  size_t capacity_ = 0;  // the GPU's memory in bytes
  MemoryPool pool_;
  Scratch bytes_, sums_, workspace_;
  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  cudaEvent_t uploaded_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  std::unique_ptr<CudnnOps> cudnn_;
  static constexpr size_t kBlasWorkspace = 32u << 20;
  void* blas_workspace_ = nullptr;  // held for the device's life (graphs point into it)
  float* norm_ = nullptr;           // sum_squares_into's norm, before it is squared
  void* read_buffer_ = nullptr;     // read_doubles' pinned landing place
  size_t read_bytes_ = 0;
  double* later_host_ = nullptr;    // read_doubles_later's pinned slots, kMaxWrite doubles each
  cudaEvent_t later_events_[kLaterReads] = {};
  int later_counts_[kLaterReads] = {};
  int later_turn_ = 0;
  bool capturing_ = false;
  std::map<int, cudaGraphExec_t> graphs_;
  int next_graph_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(const CudaOptions& options) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    TANDEM_FAIL_HINT("set device='cpu' (or 'auto', which falls back to the CPU), or run where a GPU is present",
                     "no CUDA device to run on: ",
                     err != cudaSuccess ? std::string(cudaGetErrorString(err)) : std::string("none found"));
  TANDEM_CHECK_HINT(options.ordinal >= 0 && options.ordinal < count, "use fewer ranks per host than GPUs, or fewer ranks",
                    "GPU ", options.ordinal, " asked for, but this host has ", count);
  return std::make_unique<CudaDevice>(options);
}

void* cuda_stream_of(Device& device) {
  auto* d = dynamic_cast<CudaDevice*>(&device);
  TANDEM_CHECK(d, "cuda_stream_of() was given the ", device.name(), " device (a bug in tandem)");
  return d->stream();
}

int cuda_ordinal_of(Device& device) {
  auto* d = dynamic_cast<CudaDevice*>(&device);
  TANDEM_CHECK(d, "cuda_ordinal_of() was given the ", device.name(), " device (a bug in tandem)");
  return d->ordinal();
}

}  // namespace tandem

#else

namespace tandem {

std::unique_ptr<Device> make_cuda_device(const CudaOptions&) {
  TANDEM_FAIL_HINT("set device='cpu' (or 'auto'), or rebuild tandem where CUDA, cuDNN and NCCL are installed",
                   "this tandem was built without CUDA");
}
void* cuda_stream_of(Device& device) { TANDEM_FAIL("no CUDA in this build, asked for the stream of ", device.name()); }
int cuda_ordinal_of(Device& device) { TANDEM_FAIL("no CUDA in this build, asked about ", device.name()); }

}  // namespace tandem

#endif
