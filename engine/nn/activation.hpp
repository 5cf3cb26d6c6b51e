#pragma once
// A standalone ReLU, for places where it cannot be fused into the layer before it
// (after pooling or dropout). Backward uses the output (y > 0), so no mask is stored.
#include "engine/nn/layer.hpp"

namespace tandem {

class ReLU final : public Layer {
public:
  ReLU(Device& dev, Shape shape) : Layer(dev), shape_(std::move(shape)) {}
  std::string describe() const override { return "relu"; }
  const Shape& output_shape() const override { return shape_; }
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

private:
  Shape shape_;
  Tensor y_, dx_;
};

}  // namespace tandem
