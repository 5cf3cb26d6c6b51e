#include "engine/nn/activation.hpp"

namespace tandem {

const Tensor& ReLU::forward(const Tensor& x, const StepContext&) {
  y_.ensure(dev_, x.shape());
  dev_.copy(y_.data(), x.data(), static_cast<size_t>(x.numel()));
  dev_.bias_act_forward(y_.data(), nullptr, 1, static_cast<int>(x.numel()), Activation::relu);
  return y_;
}

const Tensor& ReLU::backward(const Tensor& dy, bool need_dx, const StepContext&) {
  if (!need_dx) return dx_ = Tensor();
  // dy is ours to modify (see layer.hpp), so the mask is applied in place.
  dev_.act_backward(y_.data(), dy.data(), static_cast<size_t>(dy.numel()), Activation::relu);
  dx_ = dy;
  return dx_;
}

}  // namespace tandem
