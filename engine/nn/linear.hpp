#pragma once
// Fully connected layer y = act(x W^T + b), W stored [out, in] as in torch, with an
// optional fused activation (the model builder folds a following ReLU into it).
#include "engine/nn/layer.hpp"

namespace tandem {

class Linear final : public Layer {
public:
  Linear(Device& dev, int64_t in, int64_t out, bool bias, Activation act);
  std::string describe() const override;
  const Shape& output_shape() const override { return out_shape_; }
  size_t param_count() const override { return static_cast<size_t>(in_ * out_ + (bias_ ? out_ : 0)); }
  void bind(float* params, float* grads) override;
  void no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const override {
    if (bias_) out.emplace_back(base + static_cast<size_t>(in_ * out_), static_cast<size_t>(out_));
  }
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

private:
  int64_t in_, out_;
  bool bias_;
  Activation act_;
  Shape out_shape_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  Tensor x_, y_, dx_;
  GradScratch bias_scratch_;  // the bias gradient while accumulating
};

}  // namespace tandem
