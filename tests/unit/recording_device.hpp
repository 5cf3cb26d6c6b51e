#pragma once
// A CPU device that captures graphs the way a CUDA stream does, so the fused step's
// capture and replay (engine/train/step.hpp) are tested without a GPU: between
// begin_capture() and end_capture() every op is recorded with the arguments it was
// given (values and pointers, as a captured kernel keeps them) and not run; replay()
// runs the recording again. What a capture cannot hold fails as it does on a GPU: an
// op whose result comes back to the host (a read, a sum returned, a synchronize).
// Allocation during a capture is allowed and moves the memory epoch, as the CUDA
// device's pool does for a block its cache holds (a miss fails there, as refuse()
// makes an op fail here). refuse(op) makes that op fail during a capture, to test
// the fallback.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"

namespace tandem::test {

class RecordingDevice final : public Device {
public:
  RecordingDevice() : cpu_(cpu_device()) {}

  void refuse(const std::string& op) { refused_ = op; }
  int ops_recorded() const { return recorded_; }

  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string name() const override { return "recording cpu"; }
  float* allocate(size_t count) override {
    ++epoch_;
    return cpu_.allocate(count);
  }
  void deallocate(float* p, size_t count) override {
    ++epoch_;
    cpu_.deallocate(p, count);
  }
  size_t bytes_in_use() const override { return cpu_.bytes_in_use(); }
  uint64_t memory_epoch() const override { return epoch_; }
  void set_blas_threads(int threads) override { cpu_.set_blas_threads(threads); }

  // Host-returning or host-ordered: never in a capture.
  void copy_from_host(float* dst, const float* src, size_t count) override {
    host("copy_from_host");
    cpu_.copy_from_host(dst, src, count);
  }
  void copy_to_host(float* dst, const float* src, size_t count) override {
    host("copy_to_host");
    cpu_.copy_to_host(dst, src, count);
  }
  void synchronize() override { host("synchronize"); }
  void copy_bytes_from_host(void* dst, const void* src, size_t bytes) override {
    host("copy_bytes_from_host");
    cpu_.copy_bytes_from_host(dst, src, bytes);
  }
  double sum_squares(const float* x, size_t count) override {
    host("sum_squares");
    return cpu_.sum_squares(x, count);
  }
  void batchnorm_sums(const float* x, int batch, int channels, int spatial, double* sums) override {
    host("batchnorm_sums");
    cpu_.batchnorm_sums(x, batch, channels, spatial, sums);
  }
  void batchnorm_backward_sums(const float* dy, const float* xhat, int batch, int channels, int spatial,
                               double* sums) override {
    host("batchnorm_backward_sums");
    cpu_.batchnorm_backward_sums(dy, xhat, batch, channels, spatial, sums);
  }
  void read_doubles(double* dst, const double* src, int count) override {
    host("read_doubles");
    cpu_.read_doubles(dst, src, count);
  }
  // A kernel with its values as arguments: recorded with the values of the call.
  void write_doubles(double* dst, const double* src, int count) override {
    std::vector<double> v(src, src + count);
    run("write_doubles", [=] { cpu_.write_doubles(dst, v.data(), count); });
  }

  // Device ops: recorded during a capture.
  void copy(float* dst, const float* src, size_t count) override {
    run("copy", [=] { cpu_.copy(dst, src, count); });
  }
  void fill(float* dst, size_t count, float value) override {
    run("fill", [=] { cpu_.fill(dst, count, value); });
  }
  void gather_byte_rows(const ByteRowTable& t, const int64_t* indices, int64_t count, float* x,
                        int32_t* labels) override {
    run("gather_byte_rows", [=] { cpu_.gather_byte_rows(t, indices, count, x, labels); });
  }
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc) override {
    run("gemm", [=] { cpu_.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
  }
  void bias_act_forward(float* y, const float* bias, int rows, int cols, Activation act) override {
    run("bias_act_forward", [=] { cpu_.bias_act_forward(y, bias, rows, cols, act); });
  }
  void act_backward(const float* y, float* dy, size_t count, Activation act) override {
    run("act_backward", [=] { cpu_.act_backward(y, dy, count, act); });
  }
  void bias_grad(const float* dy, int rows, int cols, float* db) override {
    run("bias_grad", [=] { cpu_.bias_grad(dy, rows, cols, db); });
  }
  void channel_bias_act_forward(float* y, const float* bias, int batch, int channels, int spatial,
                                Activation act) override {
    run("channel_bias_act_forward", [=] { cpu_.channel_bias_act_forward(y, bias, batch, channels, spatial, act); });
  }
  void channel_bias_grad(const float* dy, int batch, int channels, int spatial, float* db) override {
    run("channel_bias_grad", [=] { cpu_.channel_bias_grad(dy, batch, channels, spatial, db); });
  }
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, float* y) override {
    run("conv2d_forward", [=] { cpu_.conv2d_forward(s, x, w, y); });
  }
  void conv2d_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dw,
                       float* dx) override {
    run("conv2d_backward", [=] { cpu_.conv2d_backward(s, x, w, dy, dw, dx); });
  }
  void maxpool_forward(const float* x, int batch, int channels, int height, int width, int k, int stride, float* y,
                       int32_t* argmax) override {
    run("maxpool_forward", [=] { cpu_.maxpool_forward(x, batch, channels, height, width, k, stride, y, argmax); });
  }
  void maxpool_backward(const float* x, const float* y, const float* dy, const int32_t* argmax, int batch,
                        int channels, int height, int width, int k, int stride, float* dx) override {
    run("maxpool_backward",
        [=] { cpu_.maxpool_backward(x, y, dy, argmax, batch, channels, height, width, k, stride, dx); });
  }
  void dropout_forward(const float* x, float* y, int rows, int cols, float p, const DropoutSeed& seed,
                       int64_t first_row) override {
    run("dropout_forward", [=] { cpu_.dropout_forward(x, y, rows, cols, p, seed, first_row); });
  }
  void dropout_backward(const float* dy, float* dx, int rows, int cols, float p, const DropoutSeed& seed,
                        int64_t first_row) override {
    run("dropout_backward", [=] { cpu_.dropout_backward(dy, dx, rows, cols, p, seed, first_row); });
  }
  void global_avgpool_forward(const float* x, int batch, int channels, int spatial, float* y) override {
    run("global_avgpool_forward", [=] { cpu_.global_avgpool_forward(x, batch, channels, spatial, y); });
  }
  void global_avgpool_backward(const float* dy, int batch, int channels, int spatial, float* dx) override {
    run("global_avgpool_backward", [=] { cpu_.global_avgpool_backward(dy, batch, channels, spatial, dx); });
  }
  void add_relu(const float* a, const float* b, float* y, size_t count) override {
    run("add_relu", [=] { cpu_.add_relu(a, b, y, count); });
  }
  void add(const float* a, const float* b, float* y, size_t count) override {
    run("add", [=] { cpu_.add(a, b, y, count); });
  }
  void batchnorm_forward(const float* x, const float* mean, const float* invstd, const float* gamma,
                         const float* beta, int batch, int channels, int spatial, float* xhat, float* y) override {
    run("batchnorm_forward",
        [=] { cpu_.batchnorm_forward(x, mean, invstd, gamma, beta, batch, channels, spatial, xhat, y); });
  }
  void batchnorm_backward(const float* dy, const float* xhat, const float* gamma, const float* invstd,
                          const double* sums, double count, int batch, int channels, int spatial,
                          float* dx) override {
    host("batchnorm_backward");  // its sums are host memory the caller may reuse
    cpu_.batchnorm_backward(dy, xhat, gamma, invstd, sums, count, batch, channels, spatial, dx);
  }
  void softmax_xent_into(const float* logits, const int32_t* labels, int rows, int classes, int ld, float* dlogits,
                         double* totals, bool accumulate) override {
    run("softmax_xent_into",
        [=] { cpu_.softmax_xent_into(logits, labels, rows, classes, ld, dlogits, totals, accumulate); });
  }
  void gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, int64_t sa,
                    const float* b, int ldb, int64_t sb, float beta, float* c, int ldc, int64_t sc,
                    int count) override {
    run("gemm_batched",
        [=] { cpu_.gemm_batched(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, count); });
  }
  void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq, int dim,
                         int vocab, float* y) override {
    run("embedding_forward", [=] { cpu_.embedding_forward(tokens, wte, wpe, batch, seq, dim, vocab, y); });
  }
  void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab, float* dwte,
                          float* dwpe) override {
    run("embedding_backward", [=] { cpu_.embedding_backward(tokens, dy, batch, seq, dim, vocab, dwte, dwpe); });
  }
  void layernorm_forward(const float* x, const float* gamma, const float* beta, int rows, int dim, float eps,
                         float* y, float* mean, float* rstd) override {
    run("layernorm_forward", [=] { cpu_.layernorm_forward(x, gamma, beta, rows, dim, eps, y, mean, rstd); });
  }
  void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                          int rows, int dim, float* dx, float* dgamma, float* dbeta) override {
    run("layernorm_backward",
        [=] { cpu_.layernorm_backward(dy, x, gamma, mean, rstd, rows, dim, dx, dgamma, dbeta); });
  }
  void gelu_forward(const float* x, float* y, size_t count) override {
    run("gelu_forward", [=] { cpu_.gelu_forward(x, y, count); });
  }
  void gelu_backward(const float* x, const float* dy, float* dx, size_t count) override {
    run("gelu_backward", [=] { cpu_.gelu_backward(x, dy, dx, count); });
  }
  void causal_softmax_forward(const float* scores, float* att, int64_t mats, int seq, float scale) override {
    run("causal_softmax_forward", [=] { cpu_.causal_softmax_forward(scores, att, mats, seq, scale); });
  }
  void causal_softmax_backward(const float* att, const float* datt, float* dscores, int64_t mats, int seq,
                               float scale) override {
    run("causal_softmax_backward", [=] { cpu_.causal_softmax_backward(att, datt, dscores, mats, seq, scale); });
  }
  void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads, int head_dim,
                     bool to_heads) override {
    run("heads_permute",
        [=] { cpu_.heads_permute(seq_layout, head_layout, batch, seq, parts, heads, head_dim, to_heads); });
  }
  void add_inplace(float* y, const float* x, size_t count) override {
    run("add_inplace", [=] { cpu_.add_inplace(y, x, count); });
  }
  void sum_squares_into(const float* x, size_t count, double* out) override {
    run("sum_squares_into", [=] { cpu_.sum_squares_into(x, count, out); });
  }
  void decide_step(double* step, const double* totals, const StepRule& rule) override {
    run("decide_step", [=] { cpu_.decide_step(step, totals, rule); });
  }
  void sgd_step(float* param, const float* grad, float* velocity, size_t count, const double* step, float momentum,
                float weight_decay, bool nesterov) override {
    run("sgd_step",
        [=] { cpu_.sgd_step(param, grad, velocity, count, step, momentum, weight_decay, nesterov); });
  }
  void adamw_step(float* param, const float* grad, float* m, float* v, size_t count, const double* step, float beta1,
                  float beta2, float eps, float weight_decay) override {
    run("adamw_step",
        [=] { cpu_.adamw_step(param, grad, m, v, count, step, beta1, beta2, eps, weight_decay); });
  }

  // ---- Capture.
  bool can_capture() const override { return true; }
  void begin_capture() override {
    TANDEM_CHECK(!capturing_, "begin_capture during a capture");
    capturing_ = true;
    tape_.clear();
  }
  int end_capture() override {
    TANDEM_CHECK(capturing_, "end_capture with no capture under way");
    capturing_ = false;
    graphs_[next_] = std::move(tape_);
    tape_.clear();
    return next_++;
  }
  void abort_capture() override {
    capturing_ = false;
    tape_.clear();
  }
  void replay(int graph) override {
    TANDEM_CHECK(!capturing_, "replay during a capture");
    const auto it = graphs_.find(graph);
    TANDEM_CHECK(it != graphs_.end(), "replay of graph ", graph, ", which was dropped or never captured");
    for (const auto& op : it->second) op();
  }
  void drop_graph(int graph) override { graphs_.erase(graph); }
  size_t graphs_held() const { return graphs_.size(); }

private:
  void host(const char* op) {
    TANDEM_CHECK(!capturing_, op, " during a capture: its result must come back to the host, which a graph cannot do");
  }
  void run(const char* op, std::function<void()> f) {
    if (!capturing_) {
      f();
      return;
    }
    TANDEM_CHECK(refused_ != op, op, " refused during a capture (the test asked for it)");
    tape_.push_back(std::move(f));
    ++recorded_;
  }

  Device& cpu_;
  bool capturing_ = false;
  std::vector<std::function<void()>> tape_;
  std::map<int, std::vector<std::function<void()>>> graphs_;
  int next_ = 0, recorded_ = 0;
  uint64_t epoch_ = 0;
  std::string refused_;
};

}  // namespace tandem::test
