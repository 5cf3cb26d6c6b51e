#pragma once
// The Device interface: memory and every compute op a layer needs. Layers talk only to
// this interface, so the CUDA device (a later backend) plugs in without touching them.
// Ops take raw float pointers plus sizes: the layer owns shapes and the device owns
// where the numbers live. Tensors are row-major; images are NCHW.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tandem {

enum class DeviceKind { cpu, cuda };

// Which activation a fused bias+activation op applies.
enum class Activation { none, relu };

class Device {
public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;

  // Memory. bytes_in_use is what WorkerStats reports as the worker's memory.
  virtual float* allocate(size_t count) = 0;
  virtual void deallocate(float* p, size_t count) = 0;
  virtual size_t bytes_in_use() const = 0;
  virtual void copy_from_host(float* dst, const float* src, size_t count) = 0;
  virtual void copy_to_host(float* dst, const float* src, size_t count) = 0;
  virtual void copy(float* dst, const float* src, size_t count) = 0;
  virtual void fill(float* dst, size_t count, float value) = 0;

  // C = alpha * op(A) * op(B) + beta * C, row-major, op = transpose when trans_* is set.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc) = 0;

  // y[r, c] = act(y[r, c] + bias[c]) for a rows x cols matrix (bias may be null).
  virtual void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act) = 0;
  // dy[i] *= act'(y[i]) in place, from the activation's output y.
  virtual void act_backward(const float* y, float* dy, size_t count, Activation act) = 0;
  // db[c] = sum over rows of dy[r, c] (overwrites db).
  virtual void bias_grad(const float* dy, int rows, int cols, float* db) = 0;
  // NCHW: y[n, c, :] = act(y[n, c, :] + bias[c]); spatial = H*W.
  virtual void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial,
                                        Activation act) = 0;
  // db[c] = sum over n and spatial of dy[n, c, :] (overwrites db).
  virtual void channel_bias_grad(const float* dy, int batch, int channels, int spatial, float* db) = 0;

  // Convolution lowering for one image (C x H x W) into columns (C*kh*kw) x (oh*ow), and back
  // (col2im accumulates into a zeroed image).
  virtual void im2col(const float* image, int channels, int height, int width, int kh, int kw, int pad, int stride,
                      float* columns) = 0;
  virtual void col2im(const float* columns, int channels, int height, int width, int kh, int kw, int pad,
                      int stride, float* image) = 0;

  // Max pooling over NCHW; argmax (flat index within each H*W plane) kept for backward.
  virtual void maxpool_forward(const float* x, int batch, int channels, int height, int width, int k, int stride,
                               float* y, int32_t* argmax) = 0;
  virtual void maxpool_backward(const float* dy, const int32_t* argmax, int batch, int channels, int height,
                                int width, int out_h, int out_w, float* dx) = 0;

  // Inverted dropout with a counter-based mask: element i of row r is kept iff
  // hash(seed, first_row + r, i) >= p. Keyed by the sample's global position so the
  // mask does not depend on how the global batch is split across workers.
  virtual void dropout_forward(const float* x, float* y, int rows, int cols, float p, uint64_t seed,
                               int64_t first_row) = 0;
  virtual void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, uint64_t seed,
                                int64_t first_row) = 0;

  // Global average pooling, [batch, channels, spatial] -> [batch, channels], and back.
  virtual void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y) = 0;
  virtual void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx) = 0;
  // Elementwise y = relu(a + b): a residual block's join (act_backward undoes the ReLU).
  virtual void add_relu(const float* a, const float* b, float* y, size_t count) = 0;
  // Elementwise y = a + b (gradients meeting where a residual block forked).
  virtual void add(const float* a, const float* b, float* y, size_t count) = 0;

  // Batch normalisation over [batch, channels, spatial] (kernels/cpu/batchnorm.hpp):
  // per-channel sums (2 x channels doubles, on the host, so they can be summed over
  // workers), the normalisation, and the same two steps backward.
  virtual void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums) = 0;
  virtual void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma,
                                 const float* beta, int batch, int channels, int spatial, float* xhat, float* y) = 0;
  virtual void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial,
                                       double* sums) = 0;
  virtual void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                                  const double* sums, double count, int batch, int channels, int spatial,
                                  float* dx) = 0;

  // Softmax cross-entropy with SUM reduction over rows, fused with its gradient:
  // dlogits = softmax(logits) - onehot(label). Returns the loss sum; *correct counts
  // rows whose arg-max equals the label. dlogits may be null (evaluation).
  virtual double softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                              int64_t* correct) = 0;

  // The SGD update fused over the whole flat parameter buffer:
  //   g = grad * grad_scale + weight_decay * param;  v = momentum * v + g;
  //   param -= lr * (nesterov ? g + momentum * v : v)
  // grad_scale folds in the 1/B of the SUM-reduced loss.
  virtual void sgd_step(float* param, const float* grad, float* velocity, size_t count, float lr, float momentum,
                        float weight_decay, float grad_scale, bool nesterov) = 0;
};

// The process-wide CPU device.
Device& cpu_device();

}  // namespace tandem
