#pragma once
// Max pooling (no padding) over NCHW; the arg-max of each output is kept from forward.
#include <vector>

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
  Tensor y_, dx_;
  Shape x_shape_;
  // Indices are small ints; kept in a float-typed buffer would lose them, so they get
  // their own storage (host now; the CUDA device will give it device memory).
  std::vector<int32_t> argmax_;
};

}  // namespace tandem
