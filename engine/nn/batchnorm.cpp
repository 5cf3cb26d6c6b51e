#include "engine/nn/batchnorm.hpp"

#include <cmath>
#include <sstream>

#include "engine/core/error.hpp"

namespace tandem {

BatchNorm::BatchNorm(Device& dev, const Shape& in, float eps, float momentum, bool sync)
    : Layer(dev), shape_(in), eps_(eps), momentum_(momentum), sync_(sync) {
  TANDEM_CHECK_HINT(in.size() == 3 || in.size() == 1, "put batchnorm after a conv2d or a linear layer",
                    "batchnorm needs a [channels, height, width] or [features] input, got ", shape_str(in));
  TANDEM_CHECK(eps > 0 && momentum >= 0 && momentum <= 1, "batchnorm eps must be > 0 and momentum in [0, 1], got eps ",
               eps, " momentum ", momentum);
  channels_ = static_cast<int>(in[0]);
  spatial_ = in.size() == 3 ? static_cast<int>(in[1] * in[2]) : 1;
  running_mean_.assign(static_cast<size_t>(channels_), 0.0);
  running_var_.assign(static_cast<size_t>(channels_), 1.0);
  sums_.assign(2 * static_cast<size_t>(channels_) + 1, 0.0);
  host_mean_.assign(static_cast<size_t>(channels_), 0.0f);
  host_invstd_.assign(static_cast<size_t>(channels_), 0.0f);
  host_grads_.assign(2 * static_cast<size_t>(channels_), 0.0f);
  mean_ = Tensor(dev, {channels_});
  invstd_ = Tensor(dev, {channels_});
}

std::string BatchNorm::describe() const {
  std::ostringstream os;
  os << "batchnorm(" << channels_ << (sync_ ? ", statistics over the global batch" : ", local statistics") << ") -> "
     << shape_str(shape_);
  return os.str();
}

void BatchNorm::bind(float* params, float* grads) {
  gamma_ = params;
  beta_ = params + channels_;
  dgamma_ = grads;
  dbeta_ = grads + channels_;
}

void BatchNorm::init_params(Rng&) {
  dev_.fill(gamma_, static_cast<size_t>(channels_), 1.0f);
  dev_.fill(beta_, static_cast<size_t>(channels_), 0.0f);
}

const Tensor& BatchNorm::forward(const Tensor& x, const StepContext& ctx) {
  const int n = static_cast<int>(x.dim(0));
  xhat_.ensure(dev_, x.shape());
  y_.ensure(dev_, x.shape());
  const size_t c = static_cast<size_t>(channels_);
  if (ctx.training) {
    dev_.batchnorm_sums(x.data(), n, channels_, spatial_, sums_.data());
    sums_[2 * c] = static_cast<double>(n) * spatial_;
    if (sync_ && ctx.reducer) ctx.reducer->sum(sums_.data(), sums_.size());
    count_ = sums_[2 * c];
    // No values at all: only a worker with an empty share and local statistics
    // gets here; it has nothing to normalise and nothing to learn from.
    for (size_t i = 0; i < c && count_ > 0; ++i) {
      const double mean = sums_[i] / count_;
      const double var = std::max(0.0, sums_[c + i] / count_ - mean * mean);
      host_mean_[i] = static_cast<float>(mean);
      host_invstd_[i] = static_cast<float>(1.0 / std::sqrt(var + eps_));
      if (ctx.update_running_stats) {
        running_mean_[i] = (1.0 - momentum_) * running_mean_[i] + momentum_ * mean;
        const double unbiased = count_ > 1 ? var * count_ / (count_ - 1) : var;
        running_var_[i] = (1.0 - momentum_) * running_var_[i] + momentum_ * unbiased;
      }
    }
  } else {
    for (size_t i = 0; i < c; ++i) {
      host_mean_[i] = static_cast<float>(running_mean_[i]);
      host_invstd_[i] = static_cast<float>(1.0 / std::sqrt(running_var_[i] + eps_));
    }
  }
  dev_.copy_from_host(mean_.data(), host_mean_.data(), c);
  dev_.copy_from_host(invstd_.data(), host_invstd_.data(), c);
  dev_.batchnorm_forward(x.data(), mean_.data(), invstd_.data(), gamma_, beta_, n, channels_, spatial_, xhat_.data(),
                         y_.data());
  return y_;
}

const Tensor& BatchNorm::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  const int n = static_cast<int>(dy.dim(0));
  const size_t c = static_cast<size_t>(channels_);
  dev_.batchnorm_backward_sums(dy.data(), xhat_.data(), n, channels_, spatial_, sums_.data());
  // This worker's share of dbeta = sum dy and dgamma = sum dy * xhat: the engine's
  // gradient all-reduce adds the shares up, as for every other parameter.
  for (size_t i = 0; i < c; ++i) {
    host_grads_[i] = static_cast<float>(sums_[c + i]);
    host_grads_[c + i] = static_cast<float>(sums_[i]);
  }
  dev_.copy_from_host(scratch_.target(dev_, dgamma_, 2 * c, ctx.accumulate_grads), host_grads_.data(), 2 * c);
  scratch_.finish(dev_, dgamma_, 2 * c, ctx.accumulate_grads);
  if (!need_dx) return dx_ = Tensor();
  // dx needs the sums over the whole batch (every worker's model has the same
  // layers, so all of them get here together).
  if (sync_ && ctx.reducer) ctx.reducer->sum(sums_.data(), 2 * c);
  dx_.ensure(dev_, dy.shape());
  if (count_ > 0)
    dev_.batchnorm_backward(dy.data(), xhat_.data(), gamma_, invstd_.data(), sums_.data(), count_, n, channels_,
                          spatial_, dx_.data());
  return dx_;
}

void BatchNorm::save_state(std::vector<double>& out) const {
  out.insert(out.end(), running_mean_.begin(), running_mean_.end());
  out.insert(out.end(), running_var_.begin(), running_var_.end());
}

void BatchNorm::load_state(const std::vector<double>& in, size_t* at) {
  const size_t n = running_mean_.size();
  TANDEM_CHECK(*at + 2 * n <= in.size(), "batch-norm state: ", in.size() - *at, " values left for ", 2 * n,
               " running statistics (the checkpoint is not of this model)");
  std::copy(in.begin() + static_cast<std::ptrdiff_t>(*at), in.begin() + static_cast<std::ptrdiff_t>(*at + n),
            running_mean_.begin());
  std::copy(in.begin() + static_cast<std::ptrdiff_t>(*at + n), in.begin() + static_cast<std::ptrdiff_t>(*at + 2 * n),
            running_var_.begin());
  *at += 2 * n;
}

}  // namespace tandem
