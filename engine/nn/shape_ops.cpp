#include "engine/nn/shape_ops.hpp"

#include "engine/core/error.hpp"

namespace tandem {

namespace {
Shape with_batch(int64_t n, const Shape& s) {
  Shape out{n};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}
}  // namespace

const Tensor& Flatten::forward(const Tensor& x, const StepContext&) {
  y_ = x.reshape(with_batch(x.dim(0), out_));
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dy, bool need_dx, const StepContext&) {
  if (!need_dx) return dx_ = Tensor();
  dx_ = dy.reshape(with_batch(dy.dim(0), in_));
  return dx_;
}

Dropout::Dropout(Device& dev, Shape shape, float p, uint64_t salt)
    : Layer(dev), shape_(std::move(shape)), p_(p), salt_(salt) {
  TANDEM_CHECK(p >= 0.0f && p < 1.0f, "dropout probability must be in [0, 1), got ", p);
}

const Tensor& Dropout::forward(const Tensor& x, const StepContext& ctx) {
  active_ = ctx.training && p_ > 0.0f;
  if (!active_) return y_ = x;
  y_.ensure(dev_, x.shape());
  const int rows = static_cast<int>(x.dim(0)), cols = static_cast<int>(x.numel() / std::max<int64_t>(x.dim(0), 1));
  dev_.dropout_forward(x.data(), y_.data(), rows, cols, p_, DropoutSeed{ctx.seed, ctx.seed_on_device, salt_},
                       ctx.first_sample);
  return y_;
}

const Tensor& Dropout::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  if (!need_dx) return dx_ = Tensor();
  if (!active_) return dx_ = dy;
  dx_.ensure(dev_, dy.shape());
  const int rows = static_cast<int>(dy.dim(0)), cols = static_cast<int>(dy.numel() / std::max<int64_t>(dy.dim(0), 1));
  dev_.dropout_backward(dy.data(), dx_.data(), rows, cols, p_, DropoutSeed{ctx.seed, ctx.seed_on_device, salt_},
                        ctx.first_sample);
  return dx_;
}

}  // namespace tandem
