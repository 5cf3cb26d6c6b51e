#include "engine/nn/conv2d.hpp"

#include <cmath>

#include "engine/core/error.hpp"

namespace tandem {

Conv2d::Conv2d(Device& dev, const Shape& in, int out_channels, int kernel, int stride, int padding, bool bias,
               Activation act)
    : Layer(dev), oc_(out_channels), k_(kernel), stride_(stride), pad_(padding), bias_(bias), act_(act) {
  TANDEM_CHECK(in.size() == 3, "conv2d needs a [channels, height, width] input, got ", shape_str(in));
  TANDEM_CHECK(out_channels > 0 && kernel > 0 && stride > 0 && padding >= 0, "conv2d arguments out of range");
  ic_ = static_cast<int>(in[0]);
  ih_ = static_cast<int>(in[1]);
  iw_ = static_cast<int>(in[2]);
  oh_ = (ih_ + 2 * pad_ - k_) / stride_ + 1;
  ow_ = (iw_ + 2 * pad_ - k_) / stride_ + 1;
  TANDEM_CHECK(oh_ > 0 && ow_ > 0, "conv2d kernel ", k_, " does not fit input ", shape_str(in), " with padding ",
               pad_);
  out_shape_ = {oc_, oh_, ow_};
}

std::string Conv2d::describe() const {
  return "conv2d(" + std::to_string(ic_) + " -> " + std::to_string(oc_) + ", k" + std::to_string(k_) + " s" +
         std::to_string(stride_) + " p" + std::to_string(pad_) + (act_ == Activation::relu ? ", relu" : "") +
         ") -> " + shape_str(out_shape_);
}

void Conv2d::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = bias_ ? params + weight_count() : nullptr;
  db_ = bias_ ? grads + weight_count() : nullptr;
}

void Conv2d::init_params(Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(ic_ * k_ * k_));
  init_uniform(dev_, w_, static_cast<size_t>(weight_count()), bound, rng);
  if (bias_) init_uniform(dev_, b_, static_cast<size_t>(oc_), bound, rng);
}

ConvShape Conv2d::geometry(int batch) const {
  ConvShape s;
  s.batch = batch;
  s.in_channels = ic_;
  s.height = ih_;
  s.width = iw_;
  s.out_channels = oc_;
  s.kernel = k_;
  s.pad = pad_;
  s.stride = stride_;
  return s;
}

const Tensor& Conv2d::forward(const Tensor& x, const StepContext&) {
  const int n = static_cast<int>(x.dim(0));
  TANDEM_CHECK(x.numel() == static_cast<int64_t>(n) * ic_ * ih_ * iw_, describe(), " got input ",
               shape_str(x.shape()));
  x_ = x;
  y_.ensure(dev_, {n, oc_, oh_, ow_});
  dev_.conv2d_forward(geometry(n), x.data(), w_, y_.data());
  dev_.channel_bias_act_forward(y_.data(), b_, n, oc_, oh_ * ow_, act_);
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  const int n = static_cast<int>(x_.dim(0));
  const bool acc = ctx.accumulate_grads;
  float* g = dy.data();
  dev_.act_backward(y_.data(), g, static_cast<size_t>(n) * oc_ * oh_ * ow_, act_);
  if (bias_) {
    const size_t nb = static_cast<size_t>(oc_);
    dev_.channel_bias_grad(g, n, oc_, oh_ * ow_, bias_scratch_.target(dev_, db_, nb, acc));
    bias_scratch_.finish(dev_, db_, nb, acc);
  }
  if (need_dx)
    dx_.ensure(dev_, x_.shape());
  else
    dx_ = Tensor();
  // The device's convolution overwrites dW (im2col and a GEMM on the CPU, cuDNN on a
  // GPU): while accumulating it writes into scratch, added in after.
  const size_t nw = static_cast<size_t>(weight_count());
  dev_.conv2d_backward(geometry(n), x_.data(), w_, g, weight_scratch_.target(dev_, dw_, nw, acc),
                       need_dx ? dx_.data() : nullptr);
  weight_scratch_.finish(dev_, dw_, nw, acc);
  return dx_;
}

}  // namespace tandem
