#pragma once
// A GPT-2 transformer block (pre-norm), on [n, seq, C]:
//   x = x + drop(proj(attn(ln1(x))))
//   x = x + drop(fc2(gelu(fc1(ln2(x)))))
// with causal multi-head self-attention: qkv = x W_qkv^T + b, [n*seq, 3C] in torch's
// c_attn layout (q, k and v each C wide; head h owns columns h*hd .. (h+1)*hd of
// each, hd = C / n_head), softmax(q k^T / sqrt(hd)) masked to j <= i, dropout on
// the attention weights, times v, the heads concatenated again and projected.
//
// Design. The four projections are the existing Linear layer applied to the
// sequence viewed as [n*seq, C] rows (a free reshape), so their gradients are the
// ones test_layers already checks; the attention in between is device ops
// (heads_permute, gemm_batched over the n*n_head score matrices, causal_softmax)
// that the block sequences itself, keeping what backward needs. Every dropout mask
// is keyed by the sample's global position (ctx.first_sample) and a salt per site, so
// one worker with the whole batch and several with slices draw the same masks.
//
// Parameters, in this order in the block's share of the flat buffer (what a PyTorch
// replay of the model must follow; W is [out, in] as torch stores it):
//   ln1.gamma [C], ln1.beta [C],
//   attn.qkv.W [3C, C], attn.qkv.b [3C], attn.proj.W [C, C], attn.proj.b [C],
//   ln2.gamma [C], ln2.beta [C],
//   fc1.W [4C, C], fc1.b [4C], fc2.W [C, 4C], fc2.b [C]
// 12 C^2 + 13 C in all. GPT-2 init: weights N(0, 0.02), the two residual projections
// (attn.proj.W, fc2.W) N(0, 0.02 / sqrt(2 n_layer)), biases 0, gamma 1, beta 0; drawn
// in the order above. Biases and the layer norms' parameters do not decay.
#include <array>

#include "engine/nn/layernorm.hpp"
#include "engine/nn/linear.hpp"

namespace tandem {

class TransformerBlock final : public Layer {
public:
  // in: [seq, C] per sample; C must divide by n_head. n_layer only scales the init
  // of the residual projections. dropout_salt: the block's position in the model.
  TransformerBlock(Device& dev, const Shape& in, int n_head, float dropout, int n_layer, uint64_t dropout_salt);
  std::string describe() const override;
  const Shape& output_shape() const override { return shape_; }
  size_t param_count() const override;
  // Every sub-layer's buffers plus the attention's, which grow with seq^2 per head.
  double buffer_floats_per_sample() const override;
  void bind(float* params, float* grads) override;
  void no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const override;
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;
  bool reads_sample_position() const override { return dropout_ > 0.0f; }
  // Forward multiply-adds of one sample: the four projections, 12 C^2 per position,
  // and attention's two products, 2 * n_head * seq^2 * hd (the full square: the
  // device computes the masked half too).
  double macs_per_sample() const;

private:
  enum Site : uint64_t { attn_site = 1, resid_attn_site = 2, resid_mlp_site = 3 };
  // Dropout over n rows (samples) of `cols` values at `site`, keyed by the samples'
  // global positions; forward and backward are the same map, and out may alias in.
  // Called only when the step drops (dropped_).
  void drop(const float* in, float* out, int n, int64_t cols, Site site, const StepContext& ctx);
  // Adds a residual branch to the stream, through the site's dropout (into `buf`)
  // when it is on.
  void add_branch(const Tensor& branch, Tensor& buf, float* stream, Site site, const StepContext& ctx);

  Shape shape_;
  int seq_, C_, heads_, hd_;
  float dropout_;
  int n_layer_;
  uint64_t salt_;
  bool dropped_ = false;  // whether the last forward applied dropout masks
  LayerNorm ln1_, ln2_;
  Linear qkv_, proj_, fc1_, fc2_;
  std::array<Layer*, 6> parts_;  // the sub-layers in parameter order
  float* params_ = nullptr;
  // Forward: q,k,v per head [3, n, H, seq, hd]; attention weights after softmax and
  // after dropout [n, H, seq, seq]; attention output per head [n, H, seq, hd] and
  // back in sequence layout [n, seq, C]; the attention branch after dropout, the
  // stream between the two halves (x2), GELU's output, the MLP branch after dropout.
  // fc1's output is GELU's input, which GELU's backward takes.
  Tensor x_, qkvh_, att_, att_drop_, yh_, ycat_, attn_out_, x2_, fc1_out_, gelu_, mlp_out_, y_;
  // Backward: the gradients at x2 and at x, of the attention weights, of the per-head
  // output and of q,k,v (per head, then in sequence layout).
  Tensor dx2_, dx_, datt_, dyh_, dqkvh_, dqkv_, none_;
};

}  // namespace tandem
