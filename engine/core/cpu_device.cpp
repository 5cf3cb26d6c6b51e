// The CPU device: host memory (64-byte aligned for the vector units) and the CPU
// kernels under kernels/cpu. It is also the reference every other device is tested
// against.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"
#include "kernels/cpu/adamw_step.hpp"
#include "kernels/cpu/avgpool.hpp"
#include "kernels/cpu/batchnorm.hpp"
#include "kernels/cpu/bias_act.hpp"
#include "kernels/cpu/bias_grad.hpp"
#include "kernels/cpu/causal_softmax.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gather_rows.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/heads_permute.hpp"
#include "kernels/cpu/im2col.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/maxpool.hpp"
#include "kernels/cpu/round_mantissa.hpp"
#include "kernels/cpu/sgd_step.hpp"
#include "kernels/cpu/softmax_xent.hpp"

namespace tandem {

namespace {

class CpuDevice final : public Device {
public:
  explicit CpuDevice(Precision precision) : precision_(precision) {}
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string name() const override { return "cpu"; }
  void set_blas_threads(int threads) override { cpu::set_blas_threads(threads); }

  float* allocate(size_t count) override {
    const size_t bytes = ((count * sizeof(float) + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p)
      TANDEM_FAIL_HINT("reduce the batch size or the model, or free memory on this machine",
                       "out of host memory allocating ", bytes, " bytes");
    in_use_ += bytes;
    ++epoch_;
    return static_cast<float*>(p);
  }
  void deallocate(float* p, size_t count) override {
    in_use_ -= ((count * sizeof(float) + 63) / 64) * 64;
    ++epoch_;
    std::free(p);
  }
  size_t bytes_in_use() const override { return in_use_.load(); }
  void copy_from_host(float* dst, const float* src, size_t count) override { copy(dst, src, count); }
  void copy_to_host(float* dst, const float* src, size_t count) override { copy(dst, src, count); }
  void copy(float* dst, const float* src, size_t count) override {
    if (count && dst != src) std::memcpy(dst, src, count * sizeof(float));
  }
  void copy_bytes_from_host(void* dst, const void* src, size_t bytes) override {
    if (bytes && dst != src) std::memcpy(dst, src, bytes);
  }
  void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x,
                        int32_t* labels) override {
    cpu::gather_byte_rows(t, indices, count, x, labels);
  }
  void fill(float* dst, size_t count, float value) override {
    if (count == 0) return;  // dst may be null then, which memset must not get
    if (value == 0.0f)
      std::memset(dst, 0, count * sizeof(float));
    else
      for (size_t i = 0; i < count; ++i) dst[i] = value;
  }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc) override {
    product(gemm_mantissa_bits(precision_), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act) override {
    cpu::bias_act_forward(y, bias, rows, cols, act);
  }
  void act_backward(const float* y, float* dy, size_t count, Activation act) override {
    cpu::act_backward(y, dy, count, act);
  }
  void bias_grad(const float* dy, int rows, int cols, float* db) override { cpu::bias_grad(dy, rows, cols, db); }
  void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial,
                                Activation act) override {
    cpu::channel_bias_act_forward(y, bias, batch, channels, spatial, act);
  }
  void channel_bias_grad(const float* dy, int batch, int channels, int spatial, float* db) override {
    cpu::channel_bias_grad(dy, batch, channels, spatial, db);
  }
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y) override {
    const int kdim = s.in_channels * s.kernel * s.kernel, spatial = s.out_h() * s.out_w();
    const size_t image = static_cast<size_t>(s.in_channels) * s.height * s.width;
    float* columns = scratch(static_cast<size_t>(kdim) * spatial);
    for (int i = 0; i < s.batch; ++i) {
      cpu::im2col(x + i * image, s.in_channels, s.height, s.width, s.kernel, s.kernel, s.pad, s.stride, columns);
      // y_i [oc, spatial] = W [oc, kdim] x columns [kdim, spatial]
      product(conv_mantissa_bits(precision_), false, false, s.out_channels, spatial, kdim, 1.0f, w, kdim, columns,
              spatial, 0.0f, y + static_cast<size_t>(i) * s.out_channels * spatial, spatial);
    }
    // bf16: the output rounded once after the float32 sums, as cuDNN writes bfloat16.
    cpu::round_in_place(y, static_cast<size_t>(s.batch) * s.out_channels * spatial,
                        conv_output_mantissa_bits(precision_));
  }
  void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dw,
                       float* dx) override {
    const int kdim = s.in_channels * s.kernel * s.kernel, spatial = s.out_h() * s.out_w();
    const size_t image = static_cast<size_t>(s.in_channels) * s.height * s.width;
    float* columns = scratch(static_cast<size_t>(kdim) * spatial);
    if (s.batch == 0) fill(dw, static_cast<size_t>(s.out_channels) * kdim, 0.0f);
    if (dx) fill(dx, image * s.batch, 0.0f);
    for (int i = 0; i < s.batch; ++i) {
      const float* gi = dy + static_cast<size_t>(i) * s.out_channels * spatial;
      cpu::im2col(x + i * image, s.in_channels, s.height, s.width, s.kernel, s.kernel, s.pad, s.stride, columns);
      // dW [oc, kdim] (+)= dy_i [oc, spatial] x columns^T [spatial, kdim]; the first image overwrites.
      product(conv_mantissa_bits(precision_), false, true, s.out_channels, kdim, spatial, 1.0f, gi, spatial, columns,
              spatial, i == 0 ? 0.0f : 1.0f, dw, kdim);
      if (dx) {
        // columns [kdim, spatial] = W^T [kdim, oc] x dy_i [oc, spatial], then scattered back.
        product(conv_mantissa_bits(precision_), true, false, kdim, spatial, s.out_channels, 1.0f, w, kdim, gi, spatial,
                0.0f, columns, spatial);
        cpu::col2im(columns, s.in_channels, s.height, s.width, s.kernel, s.kernel, s.pad, s.stride, dx + i * image);
      }
    }
    // bf16: each gradient rounded once, after the whole batch's float32 sums (cuDNN's
    // bfloat16 outputs).
    const int out_bits = conv_output_mantissa_bits(precision_);
    cpu::round_in_place(dw, static_cast<size_t>(s.out_channels) * kdim, out_bits);
    if (dx) cpu::round_in_place(dx, image * s.batch, out_bits);
  }
  void maxpool_forward(const float* x, int n, int c, int h, int w, int k, int stride, float* y,
                       int32_t* argmax) override {
    cpu::maxpool_forward(x, n, c, h, w, k, stride, y, argmax);
  }
  void maxpool_backward(const float*, const float*, const float* dy, const int32_t* argmax, int n, int c, int h,
                        int w, int k, int stride, float* dx) override {
    cpu::maxpool_backward(dy, argmax, n, c, h, w, cpu::pool_out_size(h, k, stride), cpu::pool_out_size(w, k, stride),
                          dx);
  }
  void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y) override {
    cpu::global_avgpool_forward(x, batch, channels, spatial, y);
  }
  void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx) override {
    cpu::global_avgpool_backward(dy, batch, channels, spatial, dx);
  }
  void add_relu(const float* a, const float* b, float* y, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      const float v = a[i] + b[i];
      y[i] = v > 0.0f ? v : 0.0f;
    }
  }
  void add(const float* a, const float* b, float* y, size_t count) override {
    for (size_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
  }
  void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums) override {
    cpu::batchnorm_sums(x, batch, channels, spatial, sums);
  }
  void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma,
                         const float* beta, int batch, int channels, int spatial, float* xhat, float* y) override {
    cpu::batchnorm_forward(x, mean, invstd, gamma, beta, batch, channels, spatial, xhat, y);
  }
  void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial,
                               double* sums) override {
    cpu::batchnorm_backward_sums(dy, xhat, batch, channels, spatial, sums);
  }
  void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                          const double* sums, double count, int batch, int channels, int spatial,
                          float* dx) override {
    cpu::batchnorm_backward(dy, xhat, gamma, invstd, sums, count, batch, channels, spatial, dx);
  }
  void dropout_forward(const float* x, float* y, int rows, int cols, float p, const DropoutSeed& seed,
                       int64_t first_row) override {
    cpu::dropout_forward(x, y, rows, cols, p, key_of(seed), first_row);
  }
  void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, const DropoutSeed& seed,
                        int64_t first_row) override {
    cpu::dropout_backward(dy, dx, rows, cols, p, key_of(seed), first_row);
  }
  void softmax_xent_into(const float* logits, const int32_t* labels, int rows, int classes, int ld, float* dlogits,
                         double* totals, bool accumulate) override {
    int64_t correct = 0;
    const double loss = cpu::softmax_xent(logits, labels, rows, classes, dlogits, &correct, ld);
    totals[0] = accumulate ? totals[0] + loss : loss;
    totals[1] = accumulate ? totals[1] + static_cast<double>(correct) : static_cast<double>(correct);
  }
  void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, int64_t stride_a,
                    const float* b, int ldb, int64_t stride_b, float beta, float* c, int ldc, int64_t stride_c,
                    int count) override {
    const int bits = gemm_mantissa_bits(precision_);
    if (bits >= 23 || count <= 0) {
      cpu::gemm_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, count);
      return;
    }
    // Each operand rounded into a dense copy, the copies one after another.
    const Shape sa = stored(ta, m, k), sb = stored(tb, k, n);
    const size_t size_a = sa.size(), size_b = sb.size();
    float* ra = operand(0, size_a * static_cast<size_t>(count));
    float* rb = operand(1, size_b * static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      cpu::round_matrix(a + i * stride_a, sa.rows, sa.cols, lda, bits, ra + i * size_a);
      cpu::round_matrix(b + i * stride_b, sb.rows, sb.cols, ldb, bits, rb + i * size_b);
    }
    cpu::gemm_batched(ta, tb, m, n, k, alpha, ra, sa.ld(), static_cast<int64_t>(size_a), rb, sb.ld(),
                      static_cast<int64_t>(size_b), beta, c, ldc, stride_c, count);
  }
  void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq, int dim,
                         int vocab, float* y) override {
    cpu::embedding_forward(tokens, wte, wpe, batch, seq, dim, vocab, y);
  }
  void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab, float* dwte,
                          float* dwpe) override {
    cpu::embedding_backward(tokens, dy, batch, seq, dim, vocab, dwte, dwpe);
  }
  void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim, float eps,
                         float* y, float* mean, float* rstd) override {
    cpu::layernorm_forward(x, gamma, beta, rows, dim, eps, y, mean, rstd);
  }
  void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                          int rows, int dim, float* dx, float* dgamma, float* dbeta) override {
    cpu::layernorm_backward(dy, x, gamma, mean, rstd, rows, dim, dx, dgamma, dbeta);
  }
  void gelu_forward(const float* x, float* y, size_t count) override { cpu::gelu_forward(x, y, count); }
  void gelu_backward(const float* x, const float* dy, float* dx, size_t count) override {
    cpu::gelu_backward(x, dy, dx, count);
  }
  void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale) override {
    cpu::causal_softmax_forward(scores, att, mats, seq, scale);
  }
  void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq,
                               float scale) override {
    cpu::causal_softmax_backward(att, datt, dscores, mats, seq, scale);
  }
  void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads, int head_dim,
                     bool to_heads) override {
    cpu::heads_permute(seq_layout, head_layout, batch, seq, parts, heads, head_dim, to_heads);
  }
  void add_inplace(float* y, const float* x, size_t count) override {
    for (size_t i = 0; i < count; ++i) y[i] += x[i];
  }
  double sum_squares(const float* x, size_t count) override {
    double s = 0.0;
    for (size_t i = 0; i < count; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
  }
  void sum_squares_into(const float* x, size_t count, double* out) override { *out = sum_squares(x, count); }
  void decide_step(double* step, const double* totals, const StepRule& rule) override {
    tandem::decide_step(step, totals, rule);
  }
  void write_doubles(double* dst, const double* src, int count) override {
    TANDEM_CHECK(count >= 0 && count <= kMaxWrite, "write_doubles of ", count, " values (at most ", kMaxWrite, ")");
    if (count) std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(double));
  }
  void read_doubles(double* dst, const double* src, int count) override {
    if (count > 0) std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(double));
  }
  // The same float casts as the CUDA kernels make of the same doubles.
  void sgd_step(float* param, const float* grad, float* velocity, size_t count, const double* step, float momentum,
                float weight_decay, bool nesterov) override {
    if (step[kStepFinite] == 0.0) return;
    cpu::sgd_step(param, grad, velocity, count, static_cast<float>(step[kStepLr]), momentum, weight_decay,
                  static_cast<float>(step[kStepScale]), nesterov);
  }
  void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, const double* step, float beta1,
                  float beta2, float eps, float weight_decay) override {
    if (step[kStepFinite] == 0.0) return;
    cpu::adamw_step(param, grad, m, v, count, static_cast<float>(step[kStepLr]), beta1, beta2, eps, weight_decay,
                    static_cast<float>(step[kStepScale]), static_cast<float>(step[kStepBias1]),
                    static_cast<float>(step[kStepBias2]));
  }
  uint64_t memory_epoch() const override { return epoch_.load(); }

private:
  // A mask's key: the iteration's seed is host memory here wherever it lies.
  static uint64_t key_of(const DropoutSeed& s) {
    return dropout_key(s.on_device ? seed_of_halves(s.on_device) : s.iteration, s);
  }

  // A GEMM operand as stored (row-major): rows x cols, op(X) being rows x cols or
  // its transpose.
  struct Shape {
    int rows, cols;
    size_t size() const { return static_cast<size_t>(rows) * cols; }
    int ld() const { return std::max(1, cols); }  // BLAS wants at least 1, also for k = 0
  };
  static Shape stored(bool trans, int op_rows, int op_cols) {
    return trans ? Shape{op_cols, op_rows} : Shape{op_rows, op_cols};
  }

  // C = alpha op(A) op(B) + beta C with A's and B's entries rounded to `bits`
  // mantissa bits first (precision.hpp); 23 bits is the plain float32 GEMM.
  void product(int bits, bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
    if (bits >= 23) {
      cpu::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    const Shape sa = stored(ta, m, k), sb = stored(tb, k, n);
    float* ra = operand(0, sa.size());
    float* rb = operand(1, sb.size());
    cpu::round_matrix(a, sa.rows, sa.cols, lda, bits, ra);
    cpu::round_matrix(b, sb.rows, sb.cols, ldb, bits, rb);
    cpu::gemm(ta, tb, m, n, k, alpha, ra, sa.ld(), rb, sb.ld(), beta, c, ldc);
  }

  // Room for the rounded copy of GEMM operand `slot` (0: A, 1: B), per thread.
  static float* operand(int slot, size_t count) {
    thread_local std::vector<float> copies[2];
    std::vector<float>& v = copies[slot];
    if (v.size() < count) v.resize(count);
    return v.data();
  }

  // The convolution's column matrix, grown to the largest layer and reused; one per
  // thread, since the device is shared by the whole process.
  static float* scratch(size_t count) {
    thread_local std::vector<float> columns;
    if (columns.size() < count) columns.resize(count);
    return columns.data();
  }

  const Precision precision_;
  std::atomic<size_t> in_use_{0};
  std::atomic<uint64_t> epoch_{0};
};

}  // namespace

Device& cpu_device(Precision precision) {
  static CpuDevice fp32(Precision::fp32), tf32(Precision::tf32), bf16(Precision::bf16);
  switch (precision) {
    case Precision::tf32: return tf32;
    case Precision::bf16: return bf16;
    case Precision::fp32: break;
  }
  return fp32;
}

}  // namespace tandem
