#pragma once
// Global average pooling: [C, H, W] -> [C], the head of a ResNet.
#include "engine/nn/layer.hpp"

namespace tandem {

class GlobalAvgPool final : public Layer {
public:
  GlobalAvgPool(Device& dev, const Shape& in);
  std::string describe() const override;
  const Shape& output_shape() const override { return out_shape_; }
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

private:
  Shape in_shape_, out_shape_;
  int channels_, spatial_;
  Tensor y_, dx_;
};

}  // namespace tandem
