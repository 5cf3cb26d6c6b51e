#include "engine/nn/linear.hpp"

#include <cmath>

#include "engine/core/error.hpp"

namespace tandem {

Linear::Linear(Device& dev, int64_t in, int64_t out, bool bias, Activation act)
    : Layer(dev), in_(in), out_(out), bias_(bias), act_(act), out_shape_{out} {
  TANDEM_CHECK(in > 0 && out > 0, "linear layer needs positive sizes, got in=", in, " out=", out);
}

std::string Linear::describe() const {
  return "linear(" + std::to_string(in_) + " -> " + std::to_string(out_) + (bias_ ? "" : ", no bias") +
         (act_ == Activation::relu ? ", relu" : "") + ")";
}

void Linear::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = bias_ ? params + in_ * out_ : nullptr;
  db_ = bias_ ? grads + in_ * out_ : nullptr;
}

void Linear::init_params(Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  init_uniform(dev_, w_, static_cast<size_t>(in_ * out_), bound, rng);
  if (bias_) init_uniform(dev_, b_, static_cast<size_t>(out_), bound, rng);
}

const Tensor& Linear::forward(const Tensor& x, const StepContext&) {
  const int64_t n = x.dim(0);
  TANDEM_CHECK(x.numel() == n * in_, describe(), " got input ", shape_str(x.shape()));
  x_ = x;
  y_.ensure(dev_, {n, out_});
  dev_.gemm(false, true, static_cast<int>(n), static_cast<int>(out_), static_cast<int>(in_), 1.0f, x.data(),
            static_cast<int>(in_), w_, static_cast<int>(in_), 0.0f, y_.data(), static_cast<int>(out_));
  dev_.bias_act_forward(y_.data(), b_, static_cast<int>(n), static_cast<int>(out_), act_);
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  const int64_t n = x_.dim(0);
  const bool acc = ctx.accumulate_grads;
  float* g = dy.data();
  dev_.act_backward(y_.data(), g, static_cast<size_t>(n * out_), act_);
  // dW = dy^T x  ([out, n] x [n, in]); beta = 0 overwrites, so a batch of 0 gives 0;
  // beta = 1 adds this micro-batch's part (and an empty one adds nothing).
  if (n == 0) {
    if (!acc) dev_.fill(dw_, static_cast<size_t>(in_ * out_), 0.0f);
  } else {
    dev_.gemm(true, false, static_cast<int>(out_), static_cast<int>(in_), static_cast<int>(n), 1.0f, g,
              static_cast<int>(out_), x_.data(), static_cast<int>(in_), acc ? 1.0f : 0.0f, dw_, static_cast<int>(in_));
  }
  if (bias_) {
    const size_t nb = static_cast<size_t>(out_);
    dev_.bias_grad(g, static_cast<int>(n), static_cast<int>(out_), bias_scratch_.target(dev_, db_, nb, acc));
    bias_scratch_.finish(dev_, db_, nb, acc);
  }
  if (!need_dx) return dx_ = Tensor();
  dx_.ensure(dev_, x_.shape());
  // dx = dy W  ([n, out] x [out, in])
  dev_.gemm(false, false, static_cast<int>(n), static_cast<int>(in_), static_cast<int>(out_), 1.0f, g,
            static_cast<int>(out_), w_, static_cast<int>(in_), 0.0f, dx_.data(), static_cast<int>(in_));
  return dx_;
}

}  // namespace tandem
