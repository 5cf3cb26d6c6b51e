#include "engine/nn/maxpool2d.hpp"

#include "engine/core/error.hpp"

namespace tandem {

MaxPool2d::MaxPool2d(Device& dev, const Shape& in, int kernel, int stride) : Layer(dev), k_(kernel), stride_(stride) {
  TANDEM_CHECK(in.size() == 3, "maxpool2d needs a [channels, height, width] input, got ", shape_str(in));
  TANDEM_CHECK(kernel > 0 && stride > 0, "maxpool2d kernel and stride must be positive");
  c_ = static_cast<int>(in[0]);
  h_ = static_cast<int>(in[1]);
  w_ = static_cast<int>(in[2]);
  oh_ = (h_ - k_) / stride_ + 1;
  ow_ = (w_ - k_) / stride_ + 1;
  TANDEM_CHECK(oh_ > 0 && ow_ > 0, "maxpool2d kernel ", k_, " does not fit input ", shape_str(in));
  out_shape_ = {c_, oh_, ow_};
}

std::string MaxPool2d::describe() const {
  return "maxpool2d(k" + std::to_string(k_) + " s" + std::to_string(stride_) + ") -> " + shape_str(out_shape_);
}

const Tensor& MaxPool2d::forward(const Tensor& x, const StepContext&) {
  const int n = static_cast<int>(x.dim(0));
    y_.ensure(dev_, {n, c_, oh_, ow_});
  x_ = x;
  argmax_.ensure(dev_, y_.shape());
  dev_.maxpool_forward(x.data(), n, c_, h_, w_, k_, stride_, y_.data(), indices());
  return y_;
}

const Tensor& MaxPool2d::backward(const Tensor& dy, bool need_dx, const StepContext&) {
  if (!need_dx) return dx_ = Tensor();
  const int n = static_cast<int>(dy.dim(0));
  dx_.ensure(dev_, x_.shape());
  dev_.maxpool_backward(x_.data(), y_.data(), dy.data(), indices(), n, c_, h_, w_, k_, stride_, dx_.data());
  return dx_;
}

}  // namespace tandem
