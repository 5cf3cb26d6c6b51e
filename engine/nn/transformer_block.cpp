#include "engine/nn/transformer_block.hpp"

#include <cmath>
#include <sstream>

#include "engine/core/error.hpp"

namespace tandem {

namespace {
// The per-sample shape [seq, C] a block needs, checked before the sub-layers use it.
const Shape& checked_sequence(const Shape& in, int n_head) {
  TANDEM_CHECK_HINT(in.size() == 2 && in[0] > 0 && in[1] > 0,
                    "put transformer_block after an embedding (it works on [seq, n_embd])",
                    "transformer_block needs a [seq, n_embd] input, got ", shape_str(in));
  TANDEM_CHECK_HINT(n_head > 0 && in[1] % n_head == 0, "choose n_head dividing n_embd",
                    "transformer_block: n_embd ", in[1], " does not split into n_head=", n_head, " heads");
  return in;
}
}  // namespace

TransformerBlock::TransformerBlock(Device& dev, const Shape& in, int n_head, float dropout, int n_layer,
                                   uint64_t dropout_salt)
    : Layer(dev),
      shape_(checked_sequence(in, n_head)),
      seq_(static_cast<int>(in[0])),
      C_(static_cast<int>(in[1])),
      heads_(n_head),
      hd_(C_ / n_head),
      dropout_(dropout),
      n_layer_(n_layer),
      salt_(dropout_salt),
      ln1_(dev, in, 1e-5f),
      ln2_(dev, in, 1e-5f),
      qkv_(dev, C_, 3 * C_, true, Activation::none),
      proj_(dev, C_, C_, true, Activation::none),
      fc1_(dev, C_, 4 * C_, true, Activation::none),
      fc2_(dev, 4 * C_, C_, true, Activation::none),
      parts_{&ln1_, &qkv_, &proj_, &ln2_, &fc1_, &fc2_} {
  TANDEM_CHECK(dropout >= 0.0f && dropout < 1.0f, "transformer_block dropout must be in [0, 1), got ", dropout);
  TANDEM_CHECK(n_layer > 0, "transformer_block n_layer must be positive, got ", n_layer);
}

std::string TransformerBlock::describe() const {
  std::ostringstream os;
  os << "transformer_block(n_embd " << C_ << ", " << heads_ << " heads, causal";
  if (dropout_ > 0.0f) os << ", dropout " << dropout_;
  os << ") -> " << shape_str(shape_);
  return os.str();
}

size_t TransformerBlock::param_count() const {
  size_t n = 0;
  for (const Layer* l : parts_) n += l->param_count();
  return n;
}

double TransformerBlock::buffer_floats_per_sample() const {
  const double tokens = seq_, sc = tokens * C_, att = static_cast<double>(heads_) * seq_ * seq_;
  const double masked = dropout_ > 0.0f ? 1.0 : 0.0;
  // Linear's output shape is per row: one row per position.
  double n = ln1_.buffer_floats_per_sample() + ln2_.buffer_floats_per_sample();
  for (const Linear* l : {&qkv_, &proj_, &fc1_, &fc2_}) n += tokens * l->buffer_floats_per_sample();
  n += (2.0 + masked) * att;          // att_, datt_ (att_drop_)
  n += 3.0 * 3.0 * sc;                // qkvh_, dqkvh_, dqkv_
  n += (7.0 + 2.0 * masked) * sc;     // yh_, ycat_, x2_, y_, dx2_, dx_, dyh_ (attn_out_, mlp_out_)
  n += 4.0 * sc;                      // gelu_
  return n;
}

double TransformerBlock::macs_per_sample() const {
  const double c = C_;
  return 12.0 * c * c * seq_ + 2.0 * heads_ * static_cast<double>(seq_) * seq_ * hd_;
}

void TransformerBlock::bind(float* params, float* grads) {
  params_ = params;
  bind_in_order(parts_, params, grads);
}

void TransformerBlock::no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const {
  no_decay_in_order(parts_, out, base);
}

void TransformerBlock::init_params(Rng& rng) {
  const float std = 0.02f, resid_std = 0.02f / std::sqrt(2.0f * static_cast<float>(n_layer_));
  float* at = params_;
  for (Layer* l : parts_) {
    if (const auto* lin = dynamic_cast<const Linear*>(l)) {  // W [out, in], then b [out]
      const size_t weights = static_cast<size_t>(lin->in() * lin->out());
      init_normal(dev_, at, weights, lin == &proj_ || lin == &fc2_ ? resid_std : std, rng);
      dev_.fill(at + weights, static_cast<size_t>(lin->out()), 0.0f);
    } else {
      l->init_params(rng);  // a layer norm: gamma 1, beta 0
    }
    at += l->param_count();
  }
}

void TransformerBlock::drop(const float* in, float* out, int n, int64_t cols, Site site, const StepContext& ctx) {
  dev_.dropout_forward(in, out, n, static_cast<int>(cols), dropout_,
                       DropoutSeed{ctx.seed, ctx.seed_on_device, salt_, site, true}, ctx.first_sample);
}

void TransformerBlock::add_branch(const Tensor& branch, Tensor& buf, float* stream, Site site,
                                  const StepContext& ctx) {
  const int n = static_cast<int>(x_.dim(0));
  const size_t count = static_cast<size_t>(branch.numel());
  const float* add = branch.data();
  if (dropped_) {
    buf.ensure(dev_, branch.shape());
    drop(branch.data(), buf.data(), n, static_cast<int64_t>(seq_) * C_, site, ctx);
    add = buf.data();
  }
  dev_.add_inplace(stream, add, count);
}

const Tensor& TransformerBlock::forward(const Tensor& x, const StepContext& ctx) {
  TANDEM_CHECK(x.rank() == 3 && x.dim(1) == seq_ && x.dim(2) == C_, describe(), " got input ",
               shape_str(x.shape()));
  const int n = static_cast<int>(x.dim(0));
  const int64_t rows = static_cast<int64_t>(n) * seq_, count = rows * C_;
  const int mats = n * heads_;
  const int64_t ss = static_cast<int64_t>(seq_) * seq_, sh = static_cast<int64_t>(seq_) * hd_;
  x_ = x;
  dropped_ = ctx.training && dropout_ > 0.0f;

  // Attention: q, k, v per head, scores, causal softmax, weights times values.
  const Tensor& qkv = qkv_.forward(ln1_.forward(x, ctx).reshape({rows, C_}), ctx);
  qkvh_.ensure(dev_, {3, n, heads_, seq_, hd_});
  dev_.heads_permute(qkv.data(), qkvh_.data(), n, seq_, 3, heads_, hd_, true);
  const float *q = qkvh_.data(), *k = q + count, *v = k + count;
  att_.ensure(dev_, {n, heads_, seq_, seq_});
  dev_.gemm_batched(false, true, seq_, seq_, hd_, 1.0f, q, hd_, sh, k, hd_, sh, 0.0f, att_.data(), seq_, ss, mats);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  dev_.causal_softmax_forward(att_.data(), att_.data(), mats, seq_, scale);
  const float* att = att_.data();
  if (dropped_) {  // one sample's weights are heads * seq^2 contiguous values: a row
    att_drop_.ensure(dev_, att_.shape());
    drop(att_.data(), att_drop_.data(), n, heads_ * ss, attn_site, ctx);
    att = att_drop_.data();
  }
  yh_.ensure(dev_, {n, heads_, seq_, hd_});
  dev_.gemm_batched(false, false, seq_, hd_, seq_, 1.0f, att, seq_, ss, v, hd_, sh, 0.0f, yh_.data(), hd_, sh, mats);
  ycat_.ensure(dev_, {n, seq_, C_});
  dev_.heads_permute(ycat_.data(), yh_.data(), n, seq_, 1, heads_, hd_, false);
  x2_.ensure(dev_, x.shape());
  dev_.copy(x2_.data(), x.data(), static_cast<size_t>(count));
  add_branch(proj_.forward(ycat_.reshape({rows, C_}), ctx), attn_out_, x2_.data(), resid_attn_site, ctx);

  // MLP.
  fc1_out_ = fc1_.forward(ln2_.forward(x2_, ctx).reshape({rows, C_}), ctx);
  gelu_.ensure(dev_, fc1_out_.shape());
  dev_.gelu_forward(fc1_out_.data(), gelu_.data(), static_cast<size_t>(fc1_out_.numel()));
  y_.ensure(dev_, x.shape());
  dev_.copy(y_.data(), x2_.data(), static_cast<size_t>(count));
  add_branch(fc2_.forward(gelu_, ctx), mlp_out_, y_.data(), resid_mlp_site, ctx);
  return y_;
}

const Tensor& TransformerBlock::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  const int n = static_cast<int>(x_.dim(0));
  const int64_t rows = static_cast<int64_t>(n) * seq_, count = rows * C_;
  const int mats = n * heads_;
  const int64_t ss = static_cast<int64_t>(seq_) * seq_, sh = static_cast<int64_t>(seq_) * hd_;

  // MLP half: dy reaches x2 through the skip and through the branch (dy is ours to
  // modify: its dropout is undone in place once the skip has its copy).
  dx2_.ensure(dev_, x_.shape());
  dev_.copy(dx2_.data(), dy.data(), static_cast<size_t>(count));
  if (dropped_) drop(dy.data(), dy.data(), n, static_cast<int64_t>(seq_) * C_, resid_mlp_site, ctx);
  const Tensor& dgelu = fc2_.backward(dy.reshape({rows, C_}), true, ctx);
  dev_.gelu_backward(fc1_out_.data(), dgelu.data(), dgelu.data(), static_cast<size_t>(dgelu.numel()));
  const Tensor& dh2 = fc1_.backward(dgelu, true, ctx);
  dev_.add_inplace(dx2_.data(), ln2_.backward(dh2.reshape({n, seq_, C_}), true, ctx).data(),
                   static_cast<size_t>(count));

  // Attention half, the same way round.
  if (need_dx) {
    dx_.ensure(dev_, x_.shape());
    dev_.copy(dx_.data(), dx2_.data(), static_cast<size_t>(count));
  }
  if (dropped_) drop(dx2_.data(), dx2_.data(), n, static_cast<int64_t>(seq_) * C_, resid_attn_site, ctx);
  const Tensor& dycat = proj_.backward(dx2_.reshape({rows, C_}), true, ctx);
  dyh_.ensure(dev_, {n, heads_, seq_, hd_});
  dev_.heads_permute(dycat.data(), dyh_.data(), n, seq_, 1, heads_, hd_, true);
  const float *q = qkvh_.data(), *k = q + count, *v = k + count;
  dqkvh_.ensure(dev_, qkvh_.shape());
  float *dq = dqkvh_.data(), *dk = dq + count, *dv = dk + count;
  const float* att = dropped_ ? att_drop_.data() : att_.data();
  // y = att v: dv = att^T dy, datt = dy v^T.
  dev_.gemm_batched(true, false, seq_, hd_, seq_, 1.0f, att, seq_, ss, dyh_.data(), hd_, sh, 0.0f, dv, hd_, sh, mats);
  datt_.ensure(dev_, att_.shape());
  dev_.gemm_batched(false, true, seq_, seq_, hd_, 1.0f, dyh_.data(), hd_, sh, v, hd_, sh, 0.0f, datt_.data(), seq_,
                    ss, mats);
  if (dropped_) drop(datt_.data(), datt_.data(), n, heads_ * ss, attn_site, ctx);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  dev_.causal_softmax_backward(att_.data(), datt_.data(), datt_.data(), mats, seq_, scale);
  // scores = q k^T: dq = dscores k, dk = dscores^T q.
  dev_.gemm_batched(false, false, seq_, hd_, seq_, 1.0f, datt_.data(), seq_, ss, k, hd_, sh, 0.0f, dq, hd_, sh, mats);
  dev_.gemm_batched(true, false, seq_, hd_, seq_, 1.0f, datt_.data(), seq_, ss, q, hd_, sh, 0.0f, dk, hd_, sh, mats);
  dqkv_.ensure(dev_, {rows, 3 * C_});
  dev_.heads_permute(dqkv_.data(), dqkvh_.data(), n, seq_, 3, heads_, hd_, false);
  const Tensor& dh1 = qkv_.backward(dqkv_, true, ctx);
  const Tensor& dx_branch = ln1_.backward(dh1.reshape({n, seq_, C_}), need_dx, ctx);
  if (!need_dx) return none_;
  dev_.add_inplace(dx_.data(), dx_branch.data(), static_cast<size_t>(count));
  return dx_;
}

}  // namespace tandem
