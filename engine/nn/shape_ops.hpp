#pragma once
// Layers that only move or mask values: Flatten (a free reshape), Dropout (inverted,
// counter-based mask keyed by the sample's global position: see kernels/cpu/dropout).
#include "engine/nn/layer.hpp"

namespace tandem {

class Flatten final : public Layer {
public:
  Flatten(Device& dev, const Shape& in) : Layer(dev), in_(in), out_{shape_numel(in)} {}
  std::string describe() const override { return "flatten(" + shape_str(in_) + " -> " + shape_str(out_) + ")"; }
  const Shape& output_shape() const override { return out_; }
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

private:
  Shape in_, out_;
  Tensor y_, dx_;
};

class Dropout final : public Layer {
public:
  // salt: the layer's position in the model, so two dropout layers draw different masks.
  Dropout(Device& dev, Shape shape, float p, uint64_t salt);
  std::string describe() const override { return "dropout(" + std::to_string(p_) + ")"; }
  const Shape& output_shape() const override { return shape_; }
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;
  bool reads_sample_position() const override { return p_ > 0.0f; }

private:
  Shape shape_;
  float p_;
  uint64_t salt_;
  bool active_ = false;  // whether the last forward applied a mask (training)
  Tensor y_, dx_;
};

}  // namespace tandem
