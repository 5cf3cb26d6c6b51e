#include "engine/nn/lm_head.hpp"

#include "engine/core/error.hpp"

namespace tandem {

LmHead::LmHead(Device& dev, const Shape& in, int vocab, Embedding* tied_to)
    : Layer(dev), tied_(tied_to), vocab_(vocab) {
  TANDEM_CHECK_HINT(in.size() == 2 && in[1] > 0, "put lm_head after the transformer blocks (and their layernorm)",
                    "lm_head needs a [seq, n_embd] input, got ", shape_str(in));
  n_embd_ = static_cast<int>(in[1]);
  if (tied_) {
    TANDEM_CHECK_HINT(tied_->n_embd() == n_embd_ && tied_->vocab() == vocab,
                      "keep the width between the embedding and the head at n_embd, or untie the head",
                      "tied lm_head: its input ", shape_str(in), " and vocab ", vocab,
                      " do not match the embedding's n_embd ", tied_->n_embd(), " and vocab ", tied_->vocab());
    tied_->mark_tied();
    vocab_ = tied_->padded_vocab();  // the columns: every row of the shared table
  }
  TANDEM_CHECK(vocab > 0, "lm_head needs a positive vocab, got ", vocab);
  out_shape_ = {in[0], vocab_};
}

std::string LmHead::describe() const {
  return "lm_head(" + std::to_string(n_embd_) + " -> " + std::to_string(vocab_) +
         (vocab() != vocab_ ? " (" + std::to_string(vocab()) + " predicted)" : std::string()) +
         (tied_ ? ", tied to the embedding" : ", untied") + ") -> " + shape_str(out_shape_);
}

void LmHead::bind(float* params, float* grads) {
  w_ = tied_ ? tied_->wte() : params;
  dw_ = tied_ ? tied_->dwte() : grads;
  TANDEM_CHECK(w_ != nullptr && dw_ != nullptr,
               "tied lm_head bound before its embedding (a bug in tandem: bind layers in order)");
}

void LmHead::init_params(Rng& rng) {
  if (!tied_) init_normal(dev_, w_, static_cast<size_t>(vocab_) * n_embd_, 0.02f, rng);
}

const Tensor& LmHead::forward(const Tensor& x, const StepContext&) {
  TANDEM_CHECK(x.rank() == 3 && x.dim(2) == n_embd_, describe(), " got input ", shape_str(x.shape()));
  const int64_t rows = x.dim(0) * x.dim(1);
  x_ = x;
  y_.ensure(dev_, {x.dim(0), x.dim(1), vocab_});
  dev_.gemm(false, true, static_cast<int>(rows), vocab_, n_embd_, 1.0f, x.data(), n_embd_, w_, n_embd_, 0.0f,
            y_.data(), vocab_);
  return y_;
}

const Tensor& LmHead::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  const int64_t rows = x_.dim(0) * x_.dim(1);
  const bool acc = ctx.accumulate_grads;
  // dW = dy^T h ([vocab, rows] x [rows, n_embd]), beta = 0: OVERWRITES (the tied
  // embedding adds its part after); beta = 1 while accumulating. An empty batch
  // writes zeros explicitly (adds nothing while accumulating).
  if (rows == 0) {
    if (!acc) dev_.fill(dw_, static_cast<size_t>(vocab_) * n_embd_, 0.0f);
  } else {
    dev_.gemm(true, false, vocab_, n_embd_, static_cast<int>(rows), 1.0f, dy.data(), vocab_, x_.data(), n_embd_,
              acc ? 1.0f : 0.0f, dw_, n_embd_);
  }
  if (!need_dx) return dx_ = Tensor();
  dx_.ensure(dev_, x_.shape());
  dev_.gemm(false, false, static_cast<int>(rows), n_embd_, vocab_, 1.0f, dy.data(), vocab_, w_, n_embd_, 0.0f,
            dx_.data(), n_embd_);
  return dx_;
}

}  // namespace tandem
