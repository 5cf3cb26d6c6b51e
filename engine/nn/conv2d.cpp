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

const Tensor& Conv2d::forward(const Tensor& x, const StepContext&) {
  const int n = static_cast<int>(x.dim(0));
  const int kdim = ic_ * k_ * k_, spatial = oh_ * ow_;
  TANDEM_CHECK(x.numel() == static_cast<int64_t>(n) * ic_ * ih_ * iw_, describe(), " got input ",
               shape_str(x.shape()));
  x_ = x;
  y_.ensure(dev_, {n, oc_, oh_, ow_});
  columns_.ensure(dev_, {kdim, spatial});
  for (int i = 0; i < n; ++i) {
    dev_.im2col(x.data() + static_cast<size_t>(i) * ic_ * ih_ * iw_, ic_, ih_, iw_, k_, k_, pad_, stride_,
                columns_.data());
    // y_i [oc, spatial] = W [oc, kdim] x columns [kdim, spatial]
    dev_.gemm(false, false, oc_, spatial, kdim, 1.0f, w_, kdim, columns_.data(), spatial, 0.0f,
              y_.data() + static_cast<size_t>(i) * oc_ * spatial, spatial);
  }
  dev_.channel_bias_act_forward(y_.data(), b_, n, oc_, spatial, act_);
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy, bool need_dx, const StepContext&) {
  const int n = static_cast<int>(x_.dim(0));
  const int kdim = ic_ * k_ * k_, spatial = oh_ * ow_;
  float* g = dy.data();
  dev_.act_backward(y_.data(), g, static_cast<size_t>(n) * oc_ * spatial, act_);
  if (bias_) dev_.channel_bias_grad(g, n, oc_, spatial, db_);
  if (n == 0) dev_.fill(dw_, static_cast<size_t>(weight_count()), 0.0f);
  if (need_dx) {
    dx_.ensure(dev_, x_.shape());
    dev_.fill(dx_.data(), static_cast<size_t>(dx_.numel()), 0.0f);
  } else {
    dx_ = Tensor();
  }
  for (int i = 0; i < n; ++i) {
    const float* gi = g + static_cast<size_t>(i) * oc_ * spatial;
    dev_.im2col(x_.data() + static_cast<size_t>(i) * ic_ * ih_ * iw_, ic_, ih_, iw_, k_, k_, pad_, stride_,
                columns_.data());
    // dW [oc, kdim] (+)= dy_i [oc, spatial] x columns^T [spatial, kdim]; the first image overwrites.
    dev_.gemm(false, true, oc_, kdim, spatial, 1.0f, gi, spatial, columns_.data(), spatial, i == 0 ? 0.0f : 1.0f,
              dw_, kdim);
    if (need_dx) {
      // columns [kdim, spatial] = W^T [kdim, oc] x dy_i [oc, spatial], then scattered back.
      dev_.gemm(true, false, kdim, spatial, oc_, 1.0f, w_, kdim, gi, spatial, 0.0f, columns_.data(), spatial);
      dev_.col2im(columns_.data(), ic_, ih_, iw_, k_, k_, pad_, stride_,
                  dx_.data() + static_cast<size_t>(i) * ic_ * ih_ * iw_);
    }
  }
  return dx_;
}

}  // namespace tandem
