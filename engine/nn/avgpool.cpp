#include "engine/nn/avgpool.hpp"

#include "engine/core/error.hpp"

namespace tandem {

GlobalAvgPool::GlobalAvgPool(Device& dev, const Shape& in) : Layer(dev), in_shape_(in) {
  TANDEM_CHECK_HINT(in.size() == 3, "put avgpool after a conv2d", "avgpool needs a [channels, height, width] input, got ",
                    shape_str(in));
  channels_ = static_cast<int>(in[0]);
  spatial_ = static_cast<int>(in[1] * in[2]);
  out_shape_ = {channels_};
}

std::string GlobalAvgPool::describe() const { return "avgpool(" + shape_str(in_shape_) + ") -> " + shape_str(out_shape_); }

const Tensor& GlobalAvgPool::forward(const Tensor& x, const StepContext&) {
  const int n = static_cast<int>(x.dim(0));
  y_.ensure(dev_, {n, channels_});
  dev_.global_avgpool_forward(x.data(), n, channels_, spatial_, y_.data());
  return y_;
}

const Tensor& GlobalAvgPool::backward(const Tensor& dy, bool need_dx, const StepContext&) {
  if (!need_dx) return dx_ = Tensor();
  const int n = static_cast<int>(dy.dim(0));
  Shape s = in_shape_;
  s.insert(s.begin(), n);
  dx_.ensure(dev_, s);
  dev_.global_avgpool_backward(dy.data(), n, channels_, spatial_, dx_.data());
  return dx_;
}

}  // namespace tandem
