#pragma once
// The Device interface: memory and every compute op a layer needs. Layers talk only to
// this interface, so the CPU and the CUDA device are interchangeable beneath them.
// Ops take raw float pointers plus sizes: the layer owns shapes and the device owns
// where the numbers live. Tensors are row-major; images are NCHW.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/precision.hpp"
#include "kernels/activation.hpp"  // which activation a fused bias+activation op applies
#include "kernels/byte_rows.hpp"   // the rows a batch is gathered from on the device
#include "kernels/dropout_seed.hpp"  // where a dropout mask's seed comes from
#include "kernels/step_rule.hpp"   // the scalars of an update, in device memory

namespace tandem {

enum class DeviceKind { cpu, cuda };

// Convolution geometry over NCHW: square kernel, the same padding on every side.
struct ConvShape {
  int batch = 0, in_channels = 0, height = 0, width = 0, out_channels = 0, kernel = 1, pad = 0, stride = 1;
  int out_h() const { return (height + 2 * pad - kernel) / stride + 1; }
  int out_w() const { return (width + 2 * pad - kernel) / stride + 1; }
  // Elements of x (N C H W), of the filter (OC C K K) and of y (N OC OH OW).
  size_t x_size() const { return static_cast<size_t>(batch) * in_channels * height * width; }
  size_t w_size() const { return static_cast<size_t>(out_channels) * in_channels * kernel * kernel; }
  size_t y_size() const { return static_cast<size_t>(batch) * out_channels * out_h() * out_w(); }
};

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
  // Waits until every op queued so far is done. Ops may run asynchronously (the CUDA
  // device queues them on a stream); host reads through copy_to_host and the ops that
  // return a number (sum_squares, the batchnorm sums) synchronise by themselves.
  virtual void synchronize() {}
  // Threads the host BLAS (OpenBLAS) may use for this worker's CPU work. One per rank
  // unless asked (DESIGN.md, Pitfalls): ranks share the host's cores.
  virtual void set_blas_threads(int threads) = 0;

  // Host-side staging for data loading: memory the device can copy from while it
  // computes (pinned memory on a GPU; plain host memory here).
  virtual void* allocate_host(size_t bytes);
  virtual void deallocate_host(void* p, size_t bytes);
  // Copies a staged batch to the device, overlapped with compute where the device can
  // (a copy engine): later ops wait for it, the host does not. `src` must come from
  // allocate_host and stay unchanged until the next synchronize().
  virtual void upload(float* dst, const float* src, size_t count) { copy_from_host(dst, src, count); }
  // The same for raw 8-bit samples, normalised on the way: dst = src * scale + shift.
  virtual void upload_normalized(float* dst, const uint8_t* src, size_t count, float scale, float shift);
  // Bytes from pageable host memory, waited for (a data set made resident once).
  virtual void copy_bytes_from_host(void* dst, const void* src, size_t bytes) = 0;
  // The device's memory in bytes, 0 where it cannot be read: what decides whether a
  // data set is held on the device (engine/train/device_input.hpp).
  virtual size_t memory_capacity() const { return 0; }
  // What of it is free now (other processes on a shared GPU count), 0 where unknown.
  virtual size_t memory_free() const { return 0; }
  // A batch gathered from a data set held on the device as rows of bytes
  // (kernels/byte_rows.hpp, every pointer of `t` device memory): x[i, :] = the
  // values of row indices[i], labels[i * t.label_bytes + k] its labels, for i <
  // count. indices are device memory and must lie in [0, t.rows) (the CPU checks, a
  // GPU cannot).
  virtual void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x,
                                int32_t* labels) = 0;

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

  // Convolution without bias (the layer adds it with channel_bias_act_forward):
  // y [batch, out_c, oh, ow] = w [out_c, in_c * k * k] applied to x [batch, in_c, h, w].
  virtual void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y) = 0;
  // Its gradients: dw (overwritten) and, unless dx is null, dx (overwritten).
  virtual void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dw,
                               float* dx) = 0;

  // Max pooling over NCHW. Backward gets both what a device may route the gradient by:
  // forward's input and output (cuDNN) and the arg-max (flat index within each H*W
  // plane) forward kept (the CPU). argmax is device memory of the output's size.
  virtual void maxpool_forward(const float* x, int batch, int channels, int height, int width, int k, int stride,
                               float* y, int32_t* argmax) = 0;
  virtual void maxpool_backward(const float* x, const float* y, const float* dy, const int32_t* argmax, int batch,
                                int channels, int height, int width, int k, int stride, float* dx) = 0;

  // Inverted dropout with a counter-based mask: element i of row r is kept iff
  // hash(key, first_row + r, i) >= p, key = dropout_key(the iteration's seed, seed)
  // (kernels/dropout_seed.hpp: the iteration's seed a value, or in device memory for
  // a captured step). Keyed by the sample's global position so the mask does not
  // depend on how the global batch is split across workers.
  virtual void dropout_forward(const float* x, float* y, int rows, int cols, float p, const DropoutSeed& seed,
                               int64_t first_row) = 0;
  virtual void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, const DropoutSeed& seed,
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

  // Softmax cross-entropy with SUM reduction over rows, fused with its gradient
  // (labels are device memory, in [0, classes): a GPU cannot report one outside, it
  // counts the row wrong and makes the loss NaN; the CPU fails with a message):
  // dlogits = softmax(logits) - onehot(label); dlogits may be null (evaluation).
  // totals (device memory, 2 doubles) gets [0] the loss sum and [1] the number of rows
  // whose arg-max equals the label: overwritten, or added to with `accumulate`.
  // Nothing comes back to the host: whoever needs the numbers reads the totals once,
  // after the rest of the step is queued (a read mid-step would stall the device).
  // (engine/nn/loss.hpp: LossTotals holds the totals and reads them back.)
  // Rows are ld floats apart (ld >= classes): the columns past `classes` (a padded
  // vocabulary's) are never predicted or counted, and their gradient is 0.
  virtual void softmax_xent_into(const float* logits, const int32_t* labels, int rows, int classes, int ld,
                                 float* dlogits, double* totals, bool accumulate) = 0;

  // ---- Sequence models (a GPT: models/gpt.lua). Shapes are row-major; a sequence
  // batch is [batch, seq, dim]; token ids travel as floats holding integers (the input
  // tensor), exact up to 2^24.

  // Batched GEMM over `count` independent products, operand i at a + i * stride_a
  // (likewise b, c); otherwise as gemm(). Attention's score and value products.
  virtual void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                            int64_t stride_a, const float* b, int ldb, int64_t stride_b, float beta, float* c,
                            int ldc, int64_t stride_c, int count) = 0;
  // y[b, t, :] = wte[tokens[b, t], :] + wpe[t, :], for tokens [batch, seq], wte
  // [vocab, dim], wpe [>= seq, dim]. A token that is not an integer in [0, vocab) is a
  // data error: the CPU reports it; the GPU cannot, so it writes NaN over that
  // position's row of y (the loss turns NaN) and gives it no token gradient.
  virtual void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq,
                                 int dim, int vocab, float* y) = 0;
  // dwte[v, :] += sum of dy[b, t, :] over positions holding token v (ACCUMULATES: a
  // tied output projection wrote its part first; an untied embedding zeroes dwte
  // before). dwpe[t, :] = sum over b of dy[b, t, :] for t < seq (OVERWRITES those rows).
  virtual void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab,
                                  float* dwte, float* dwpe) = 0;
  // Layer normalisation over the last dimension of a rows x dim matrix:
  // y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps) (biased variance,
  // as torch.nn.LayerNorm). mean and rstd (rows floats each, device memory) are kept
  // for backward.
  virtual void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim,
                                 float eps, float* y, float* mean, float* rstd) = 0;
  // dx OVERWRITTEN (it may be dy or x); dgamma, dbeta OVERWRITTEN with the sums over rows.
  virtual void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                                  const float* rstd, int rows, int dim, float* dx, float* dgamma, float* dbeta) = 0;
  // GELU, tanh approximation (GPT-2; torch's approximate='tanh'):
  // y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Backward takes forward's
  // INPUT x; dx may alias dy.
  virtual void gelu_forward(const float* x, float* y, size_t count) = 0;
  virtual void gelu_backward(const float* x, const float* dy, float* dx, size_t count) = 0;
  // Causal softmax over `mats` square seq x seq score matrices:
  // att[m, i, j] = exp(scale s[m,i,j]) / sum_{j' <= i} exp(scale s[m,i,j']) for j <= i,
  // 0 for j > i (the upper triangle is never read). att may alias scores.
  virtual void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale) = 0;
  // dscores[m,i,j] = scale * att[m,i,j] * (datt[m,i,j] - sum_{j'<=i} datt[m,i,j'] att[m,i,j'])
  // for j <= i, 0 above the diagonal. dscores may alias datt.
  virtual void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq,
                                       float scale) = 0;
  // Between a sequence layout and a per-head layout: seq_layout is
  // [batch, seq, parts, heads, head_dim] (parts = 3: a fused q,k,v projection; 1: an
  // attention output), head_layout is [parts, batch, heads, seq, head_dim]. to_heads:
  // head_layout = permute(seq_layout); otherwise seq_layout = the inverse (overwritten).
  virtual void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads,
                             int head_dim, bool to_heads) = 0;
  // Elementwise y += x (a residual stream's skip, gradients meeting at a fork).
  virtual void add_inplace(float* y, const float* x, size_t count) = 0;

  // sum of x[i]^2 (a gradient's squared norm, for the gradient noise scale).
  virtual double sum_squares(const float* x, size_t count) = 0;

  // The summed gradient's squared norm, as sum_squares, written to `out` (device
  // memory, one double) instead of coming back: the fused step decides with it on
  // the device (kernels/step_rule.hpp).
  virtual void sum_squares_into(const float* x, size_t count, double* out) = 0;
  // decide_step(step, totals, rule) of kernels/step_rule.hpp on the device: whether
  // the step is finite and the gradient's scale (step: StepSlot doubles; totals: the
  // loss totals, 2 doubles; both device memory).
  virtual void decide_step(double* step, const double* totals, const StepRule& rule) = 0;
  // A few doubles (at most kMaxWrite) from the host into device memory, queued in
  // order with the ops around it: the host does not wait, and may reuse src at once.
  static constexpr int kMaxWrite = 16;
  virtual void write_doubles(double* dst, const double* src, int count) = 0;
  // Device doubles to the host, waiting for everything queued before.
  virtual void read_doubles(double* dst, const double* src, int count) = 0;
  // The same in two halves: the copy queued now, in order with the ops around it (it
  // sees what was queued before and nothing after), and a ticket for collect(), which
  // waits for that copy alone and hands the values over. At most kLaterReads tickets
  // may be outstanding. Here the copy is made at once (a device that runs ops as they
  // come); the CUDA device queues it into pinned memory behind an event.
  static constexpr int kLaterReads = 4;
  virtual int read_doubles_later(const double* src, int count);
  virtual void collect(int ticket, double* dst);

  // The optimizer updates read their step's scalars from `step` (device memory,
  // StepSlot doubles: the learning rate, the gradient's scale, the bias corrections)
  // and do nothing when step[kStepFinite] is 0: so the host may queue an update whose
  // skip the device decides, and a captured update replays with new scalars.
  //
  // The SGD update fused over the whole flat parameter buffer:
  //   g = grad * grad_scale + weight_decay * param;  v = momentum * v + g;
  //   param -= lr * (nesterov ? g + momentum * v : v)
  // grad_scale folds in the 1/B of the SUM-reduced loss.
  virtual void sgd_step(float* param, const float* grad, float* velocity, size_t count, const double* step,
                        float momentum, float weight_decay, bool nesterov) = 0;

  // The AdamW update (torch.optim.AdamW semantics) over count floats, 1/B and the
  // clipping factor folded into grad_scale:
  //   g = grad * grad_scale;  param *= 1 - lr * weight_decay;
  //   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
  //   param -= (lr / bias_correction1) * m / (sqrt(v) / sqrt(bias_correction2) + eps)
  // with bias_correction_k = 1 - beta_k^step. Called once per parameter group (the
  // groups without weight decay pass weight_decay = 0).
  virtual void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, const double* step,
                          float beta1, float beta2, float eps, float weight_decay) = 0;

  // ---- Graph capture: a step queued once and replayed (a CUDA graph). Between
  // begin_capture() and end_capture() ops are recorded, not run; replay() runs them
  // again with the same arguments and pointers. Host-returning ops (reads, sums that
  // come back) cannot be captured and fail. A device that cannot capture says so and
  // its callers queue every op as they go.
  virtual bool can_capture() const { return false; }
  virtual void begin_capture();
  // The captured graph's handle.
  virtual int end_capture();
  // Ends a capture that failed part-way, dropping what it recorded (no-op when none
  // is under way).
  virtual void abort_capture() {}
  virtual void replay(int graph);
  // Never throws: it runs from destructors, maybe after a fault.
  virtual void drop_graph(int graph);
  // Changes whenever device memory is allocated or freed: a captured graph holds raw
  // pointers, so it stays valid only while this has not moved since its capture.
  virtual uint64_t memory_epoch() const = 0;

private:
  struct LaterRead {
    double values[kMaxWrite];
    int count = 0;
  };
  LaterRead later_[kLaterReads];
  int later_next_ = 0;
};

// The process-wide CPU device; with a precision other than fp32, one whose GEMMs and
// convolutions round their inputs as that precision does (precision.hpp).
Device& cpu_device(Precision precision = Precision::fp32);

}  // namespace tandem
