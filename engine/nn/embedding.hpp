#pragma once
// Token plus position embedding (GPT-2's wte and wpe): input [n, seq] token ids held
// as floats (the batch tensor is float; ids are exact up to 2^24), output
// [n, seq, n_embd] = wte[token] + wpe[position], then optional dropout (GPT-2's
// embd_pdrop). Parameters: wte [padded_vocab, n_embd], then wpe [seq_len, n_embd],
// both N(0, 0.02) at init; both decay under AdamW (as nanoGPT).
//
// A padded vocabulary (padded_vocab > vocab: GPT-2's 50257 tokens in 50304 rows, as
// llm.c pads them, so that the head's GEMM has a round size): the rows past vocab
// start at zero and no token reads them; a tied head's logits for them are never
// predicted (SoftmaxCrossEntropy leaves them out, their gradient is 0), so they stay
// zero but for weight decay. The valid rows draw the same numbers as an unpadded
// table's: padding changes no result, only the GEMM's shape.
//
// Weight tying. An LmHead tied to this layer shares wte: its backward runs first (it
// comes later in the model) and OVERWRITES dwte with the output projection's part,
// then this layer's backward ADDS the lookup's part (the device op accumulates). An
// untied embedding zeroes dwte first, so either way backward overwrites, as every
// layer's does.
#include "engine/nn/layer.hpp"

namespace tandem {

class Embedding final : public Layer {
public:
  // in: one sample's shape, [seq] with seq <= seq_len. dropout_salt: the layer's
  // position in the model, so its dropout mask differs from other layers'.
  // padded_vocab: the table's rows (0: vocab).
  Embedding(Device& dev, const Shape& in, int vocab, int n_embd, int seq_len, float dropout, uint64_t dropout_salt,
            int padded_vocab = 0);
  std::string describe() const override;
  const Shape& output_shape() const override { return out_shape_; }
  size_t param_count() const override { return static_cast<size_t>(padded_vocab_ + seq_len_) * n_embd_; }
  double buffer_floats_per_sample() const override;
  void bind(float* params, float* grads) override;
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;
  bool reads_sample_position() const override { return dropout_ > 0.0f; }

  // For a tied LmHead: the token embedding and its gradient, valid after bind.
  float* wte() const { return wte_; }
  float* dwte() const { return dwte_; }
  int vocab() const { return vocab_; }
  int padded_vocab() const { return padded_vocab_; }
  int n_embd() const { return n_embd_; }
  // Called by the LmHead that ties itself to this layer: from then on backward adds
  // to dwte instead of overwriting it.
  void mark_tied() { tied_ = true; }
  bool tied() const { return tied_; }

private:
  int vocab_, padded_vocab_, n_embd_, seq_len_, seq_;
  float dropout_;
  uint64_t salt_;
  bool tied_ = false;
  bool dropped_ = false;  // whether the last forward applied a dropout mask
  Shape out_shape_;
  float *wte_ = nullptr, *wpe_ = nullptr, *dwte_ = nullptr, *dwpe_ = nullptr;
  Tensor tokens_, y_, none_;
  GradScratch wpe_scratch_;  // the position rows' gradient while accumulating
};

}  // namespace tandem
