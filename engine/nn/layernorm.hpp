#pragma once
// Layer normalisation (Ba et al., 2016) over the last dimension of any [.., dim]
// input, as torch.nn.LayerNorm(dim): a learned gain (gamma, 1 at init) and shift
// (beta, 0), biased variance, eps 1e-5. Unlike batch norm it normalises each
// position on its own, so it needs no statistics across samples or workers and the
// result never depends on how the batch is split. Parameters: gamma [dim], beta
// [dim]; neither decays under AdamW.
#include "engine/nn/layer.hpp"

namespace tandem {

class LayerNorm final : public Layer {
public:
  LayerNorm(Device& dev, const Shape& in, float eps);
  std::string describe() const override;
  const Shape& output_shape() const override { return shape_; }
  size_t param_count() const override { return 2 * static_cast<size_t>(dim_); }
  // Output, input gradient, and the two per-row statistics.
  double buffer_floats_per_sample() const override;
  void bind(float* params, float* grads) override;
  void no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const override {
    out.emplace_back(base, param_count());  // gamma and beta
  }
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

private:
  Shape shape_;
  int64_t dim_;
  float eps_;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  Tensor x_, y_, mean_, rstd_, dx_, none_;
  GradScratch scratch_;  // dgamma and dbeta while accumulating
};

}  // namespace tandem
