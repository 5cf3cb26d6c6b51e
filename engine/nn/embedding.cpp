#include "engine/nn/embedding.hpp"

#include <sstream>

#include "engine/core/error.hpp"

namespace tandem {

Embedding::Embedding(Device& dev, const Shape& in, int vocab, int n_embd, int seq_len, float dropout,
                     uint64_t dropout_salt, int padded_vocab)
    : Layer(dev),
      vocab_(vocab),
      padded_vocab_(padded_vocab == 0 ? vocab : padded_vocab),
      n_embd_(n_embd),
      seq_len_(seq_len),
      dropout_(dropout),
      salt_(dropout_salt) {
  TANDEM_CHECK_HINT(vocab > 0 && n_embd > 0 && seq_len > 0, "give the embedding positive vocab, n_embd and seq_len",
                    "embedding needs positive sizes, got vocab=", vocab, " n_embd=", n_embd, " seq_len=", seq_len);
  TANDEM_CHECK_HINT(in.size() == 1 && in[0] > 0 && in[0] <= seq_len,
                    "feed the embedding token sequences of shape [seq] with seq <= seq_len (data.shape)",
                    "embedding(seq_len=", seq_len, ") got input ", shape_str(in));
  TANDEM_CHECK(dropout >= 0.0f && dropout < 1.0f, "embedding dropout must be in [0, 1), got ", dropout);
  TANDEM_CHECK_HINT(padded_vocab_ >= vocab_, "pad the vocabulary up, never down (models/gpt.lua: vocab_multiple)",
                    "embedding: padded_vocab ", padded_vocab_, " is smaller than vocab ", vocab_);
  seq_ = static_cast<int>(in[0]);
  out_shape_ = {in[0], n_embd};
}

std::string Embedding::describe() const {
  std::ostringstream os;
  os << "embedding(vocab " << vocab_;
  if (padded_vocab_ != vocab_) os << " padded to " << padded_vocab_;
  os << ", n_embd " << n_embd_ << ", seq_len " << seq_len_;
  if (dropout_ > 0.0f) os << ", dropout " << dropout_;
  os << ") -> " << shape_str(out_shape_);
  return os.str();
}

// The token ids (kept for backward) are the previous layer's; the output, and the
// dropout's copy of it.
double Embedding::buffer_floats_per_sample() const {
  return (dropout_ > 0.0f ? 2.0 : 1.0) * static_cast<double>(shape_numel(out_shape_));
}

void Embedding::bind(float* params, float* grads) {
  wte_ = params;
  dwte_ = grads;
  wpe_ = params + static_cast<size_t>(padded_vocab_) * n_embd_;
  dwpe_ = grads + static_cast<size_t>(padded_vocab_) * n_embd_;
}

void Embedding::init_params(Rng& rng) {
  init_normal(dev_, wte_, static_cast<size_t>(vocab_) * n_embd_, 0.02f, rng);
  if (padded_vocab_ > vocab_)
    dev_.fill(wte_ + static_cast<size_t>(vocab_) * n_embd_, static_cast<size_t>(padded_vocab_ - vocab_) * n_embd_,
              0.0f);
  init_normal(dev_, wpe_, static_cast<size_t>(seq_len_) * n_embd_, 0.02f, rng);
}

const Tensor& Embedding::forward(const Tensor& x, const StepContext& ctx) {
  TANDEM_CHECK(x.rank() == 2 && x.dim(1) == seq_, describe(), " got input ", shape_str(x.shape()),
               ", expected [batch, ", seq_, "] token ids");
  const int n = static_cast<int>(x.dim(0));
  tokens_ = x;
  y_.ensure(dev_, {n, seq_, n_embd_});
  dev_.embedding_forward(x.data(), wte_, wpe_, n, seq_, n_embd_, vocab_, y_.data());
  dropped_ = ctx.training && dropout_ > 0.0f;
  // In place: the mask is a pure function of (seed, sample, element), so backward
  // recomputes it and nothing needs the values before dropout.
  if (dropped_)
    dev_.dropout_forward(y_.data(), y_.data(), n, seq_ * n_embd_, dropout_,
                         DropoutSeed{ctx.seed, ctx.seed_on_device, salt_}, ctx.first_sample);
  return y_;
}

const Tensor& Embedding::backward(const Tensor& dy, bool, const StepContext& ctx) {
  const int n = static_cast<int>(tokens_.dim(0));
  if (dropped_)
    dev_.dropout_backward(dy.data(), dy.data(), n, seq_ * n_embd_, dropout_,
                          DropoutSeed{ctx.seed, ctx.seed_on_device, salt_}, ctx.first_sample);
  // The token table's gradient is scattered in (added): zeroed first unless this
  // pass accumulates, or the tied head wrote it already.
  const bool acc = ctx.accumulate_grads;
  if (!tied_ && !acc) dev_.fill(dwte_, static_cast<size_t>(padded_vocab_) * n_embd_, 0.0f);
  // The device op overwrites the position rows seen: while accumulating into scratch,
  // added in after.
  const size_t np = static_cast<size_t>(seq_) * n_embd_;
  dev_.embedding_backward(tokens_.data(), dy.data(), n, seq_, n_embd_, vocab_, dwte_,
                          wpe_scratch_.target(dev_, dwpe_, np, acc));
  wpe_scratch_.finish(dev_, dwpe_, np, acc);
  // Positions past a shorter input (seq < seq_len) get no gradient: zeros, which an
  // accumulating pass keeps.
  if (seq_ < seq_len_ && !acc)
    dev_.fill(dwpe_ + static_cast<size_t>(seq_) * n_embd_, static_cast<size_t>(seq_len_ - seq_) * n_embd_, 0.0f);
  return none_;  // token ids have no gradient
}

}  // namespace tandem
