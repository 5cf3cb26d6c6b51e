#pragma once
// 2-D convolution over NCHW through the device (im2col + GEMM on the CPU, cuDNN on a
// GPU), with an optional fused bias and activation. Weights are [out_channels, in_channels * k * k] as in torch.
#include "engine/nn/layer.hpp"

namespace tandem {

class Conv2d final : public Layer {
public:
  Conv2d(Device& dev, const Shape& in, int out_channels, int kernel, int stride, int padding, bool bias,
         Activation act);
  std::string describe() const override;
  const Shape& output_shape() const override { return out_shape_; }
  size_t param_count() const override { return static_cast<size_t>(weight_count() + (bias_ ? oc_ : 0)); }
  void bind(float* params, float* grads) override;
  void no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const override {
    if (bias_) out.emplace_back(base + static_cast<size_t>(weight_count()), static_cast<size_t>(oc_));
  }
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

private:
  ConvShape geometry(int batch) const;
  int64_t weight_count() const { return static_cast<int64_t>(oc_) * ic_ * k_ * k_; }
  int ic_, ih_, iw_, oc_, oh_, ow_, k_, stride_, pad_;
  bool bias_;
  Activation act_;
  Shape out_shape_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  Tensor x_, y_, dx_;
  GradScratch bias_scratch_, weight_scratch_;  // the gradients while accumulating
};

}  // namespace tandem
