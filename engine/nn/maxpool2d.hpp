#pragma once
// Max pooling (no padding) over NCHW; the arg-max of each output is kept from forward.

#include "engine/nn/layer.hpp"

namespace tandem {

class MaxPool2d final : public Layer {
public:
  MaxPool2d(Device& dev, const Shape& in, int kernel, int stride);
  std::string describe() const override;
  const Shape& output_shape() const override { return out_shape_; }
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

private:
  int c_, h_, w_, oh_, ow_, k_, stride_;
  Shape out_shape_;
  // The arg-max indices live in device memory like everything a device op reads:
  // a float-typed buffer of the output's size holds them bit for bit (same width).
  int32_t* indices() const { return reinterpret_cast<int32_t*>(argmax_.data()); }
  static_assert(sizeof(float) == sizeof(int32_t), "arg-max indices share float storage");

  Tensor x_, y_, dx_, argmax_;
};

}  // namespace tandem
