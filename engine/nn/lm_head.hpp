#pragma once
// A language model's output projection: logits [n, seq, vocab] = h [n, seq, n_embd]
// times W^T, no bias (GPT-2's lm_head). Tied (the default, as GPT-2): W is the
// Embedding's wte, so this layer owns no parameters; it reads the embedding's weight
// and gradient pointers when bound (the model binds layers in order, the embedding
// first), and its backward OVERWRITES dwte with its part, which the embedding's
// backward, running after it, then adds to. Untied: its own W [vocab, n_embd],
// N(0, 0.02) at init, decaying under AdamW.
// Tied to a padded table (Embedding::padded_vocab), the logits are [n, seq,
// padded_vocab]: the loss predicts only the first vocab() columns of each row.
#include "engine/nn/embedding.hpp"

namespace tandem {

class LmHead final : public Layer {
public:
  // tied_to: the embedding whose wte this head shares (marked tied here), or null
  // for an own weight of [vocab, n_embd]. in: [seq, n_embd].
  LmHead(Device& dev, const Shape& in, int vocab, Embedding* tied_to);
  std::string describe() const override;
  const Shape& output_shape() const override { return out_shape_; }
  size_t param_count() const override { return tied_ ? 0 : static_cast<size_t>(vocab_) * n_embd_; }
  // The tokens predicted: the first vocab() of each row's columns (rows of
  // output_shape().back(), more where the tied table is padded).
  int vocab() const { return tied_ ? tied_->vocab() : vocab_; }
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

private:
  Embedding* tied_;
  int vocab_, n_embd_;
  Shape out_shape_;
  float *w_ = nullptr, *dw_ = nullptr;
  Tensor x_, y_, dx_;
};

}  // namespace tandem
