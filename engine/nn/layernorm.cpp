#include "engine/nn/layernorm.hpp"

#include "engine/core/error.hpp"

namespace tandem {

LayerNorm::LayerNorm(Device& dev, const Shape& in, float eps) : Layer(dev), shape_(in), eps_(eps) {
  TANDEM_CHECK_HINT(!in.empty() && in.back() > 0, "put layernorm after a layer with a feature dimension",
                    "layernorm needs an input [.., dim] with dim > 0, got ", shape_str(in));
  TANDEM_CHECK_HINT(eps > 0.0f, "give layernorm an eps > 0 (1e-5 is torch's default)",
                    "layernorm eps must be > 0, got ", eps);
  dim_ = in.back();
}

std::string LayerNorm::describe() const {
  return "layernorm(" + std::to_string(dim_) + ") -> " + shape_str(shape_);
}

double LayerNorm::buffer_floats_per_sample() const {
  const double numel = static_cast<double>(shape_numel(shape_));
  return 2.0 * numel + 2.0 * numel / static_cast<double>(dim_);
}

void LayerNorm::bind(float* params, float* grads) {
  gamma_ = params;
  beta_ = params + dim_;
  dgamma_ = grads;
  dbeta_ = grads + dim_;
}

void LayerNorm::init_params(Rng&) {
  dev_.fill(gamma_, static_cast<size_t>(dim_), 1.0f);
  dev_.fill(beta_, static_cast<size_t>(dim_), 0.0f);
}

const Tensor& LayerNorm::forward(const Tensor& x, const StepContext&) {
  TANDEM_CHECK(x.rank() > 0 && x.shape().back() == dim_, describe(), " got input ", shape_str(x.shape()));
  const int64_t rows = x.numel() / dim_;
  x_ = x;
  y_.ensure(dev_, x.shape());
  mean_.ensure(dev_, {rows});
  rstd_.ensure(dev_, {rows});
  dev_.layernorm_forward(x.data(), gamma_, beta_, static_cast<int>(rows), static_cast<int>(dim_), eps_, y_.data(),
                         mean_.data(), rstd_.data());
  return y_;
}

const Tensor& LayerNorm::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  const int64_t rows = x_.numel() / dim_;
  // The kernel always writes dx; without need_dx it lands in scratch nobody reads.
  dx_.ensure(dev_, x_.shape());
  // It overwrites dgamma and dbeta (which lie side by side): while accumulating it
  // writes them into scratch, added in after.
  const size_t nd = 2 * static_cast<size_t>(dim_);
  float* dgamma = scratch_.target(dev_, dgamma_, nd, ctx.accumulate_grads);
  dev_.layernorm_backward(dy.data(), x_.data(), gamma_, mean_.data(), rstd_.data(), static_cast<int>(rows),
                          static_cast<int>(dim_), dx_.data(), dgamma, dgamma + dim_);
  scratch_.finish(dev_, dgamma_, nd, ctx.accumulate_grads);
  return need_dx ? dx_ : none_;
}

}  // namespace tandem
