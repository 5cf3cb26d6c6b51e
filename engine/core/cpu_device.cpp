// The CPU device: host memory (64-byte aligned for the vector units) and the CPU
// kernels under kernels/cpu. It is also the reference every other device is tested
// against.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"
#include "kernels/cpu/avgpool.hpp"
#include "kernels/cpu/batchnorm.hpp"
#include "kernels/cpu/bias_act.hpp"
#include "kernels/cpu/bias_grad.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"
#include "kernels/cpu/maxpool.hpp"
#include "kernels/cpu/sgd_step.hpp"
#include "kernels/cpu/softmax_xent.hpp"

namespace tandem {

namespace {

class CpuDevice final : public Device {
public:
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string name() const override { return "cpu"; }

  float* allocate(size_t count) override {
    const size_t bytes = ((count * sizeof(float) + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p)
      TANDEM_FAIL_HINT("reduce the batch size or the model, or free memory on this machine",
                       "out of host memory allocating ", bytes, " bytes");
    in_use_ += bytes;
    return static_cast<float*>(p);
  }
  void deallocate(float* p, size_t count) override {
    in_use_ -= ((count * sizeof(float) + 63) / 64) * 64;
    std::free(p);
  }
  size_t bytes_in_use() const override { return in_use_.load(); }
  void copy_from_host(float* dst, const float* src, size_t count) override { copy(dst, src, count); }
  void copy_to_host(float* dst, const float* src, size_t count) override { copy(dst, src, count); }
  void copy(float* dst, const float* src, size_t count) override {
    if (count && dst != src) std::memcpy(dst, src, count * sizeof(float));
  }
  void fill(float* dst, size_t count, float value) override {
    if (value == 0.0f)
      std::memset(dst, 0, count * sizeof(float));
    else
      for (size_t i = 0; i < count; ++i) dst[i] = value;
  }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc) override {
    cpu::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
  void im2col(const float* image, int c, int h, int w, int kh, int kw, int pad, int stride, float* cols) override {
    cpu::im2col(image, c, h, w, kh, kw, pad, stride, cols);
  }
  void col2im(const float* cols, int c, int h, int w, int kh, int kw, int pad, int stride, float* image) override {
    cpu::col2im(cols, c, h, w, kh, kw, pad, stride, image);
  }
  void maxpool_forward(const float* x, int n, int c, int h, int w, int k, int stride, float* y,
                       int32_t* argmax) override {
    cpu::maxpool_forward(x, n, c, h, w, k, stride, y, argmax);
  }
  void maxpool_backward(const float* dy, const int32_t* argmax, int n, int c, int h, int w, int oh, int ow,
                        float* dx) override {
    cpu::maxpool_backward(dy, argmax, n, c, h, w, oh, ow, dx);
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
  void dropout_forward(const float* x, float* y, int rows, int cols, float p, uint64_t seed,
                       int64_t first_row) override {
    cpu::dropout_forward(x, y, rows, cols, p, seed, first_row);
  }
  void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, uint64_t seed,
                        int64_t first_row) override {
    cpu::dropout_backward(dy, dx, rows, cols, p, seed, first_row);
  }
  double softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                      int64_t* correct) override {
    return cpu::softmax_xent(logits, labels, rows, classes, dlogits, correct);
  }
  void sgd_step(float* param, const float* grad, float* velocity, size_t count, float lr, float momentum,
                float weight_decay, float grad_scale, bool nesterov) override {
    cpu::sgd_step(param, grad, velocity, count, lr, momentum, weight_decay, grad_scale, nesterov);
  }

private:
  std::atomic<size_t> in_use_{0};
};

}  // namespace

Device& cpu_device() {
  static CpuDevice device;
  return device;
}

}  // namespace tandem
