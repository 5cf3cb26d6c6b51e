#include "engine/train/step.hpp"

#include <algorithm>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"

namespace tandem {

TrainStep::TrainStep(Model& model, Optimizer& optimizer, int64_t accumulate)
    : model_(model), optimizer_(optimizer), accumulate_(accumulate) {
  TANDEM_CHECK_HINT(accumulate >= 1, "set accumulate to 1 or more", "accumulate = ", accumulate);
}

void TrainStep::pass(const Tensor& x, const int32_t* labels, const StepContext& ctx, bool accumulate) {
  loss_.forward(model_.forward(x, ctx), labels, /*with_grad=*/true, totals_, accumulate);
  model_.backward(loss_.grad(), ctx);
}

LossResult TrainStep::compute(const Tensor& x, const int32_t* labels, const StepContext& ctx) {
  const int64_t n = x.rank() > 0 ? x.dim(0) : 0;
  const int64_t parts = std::min<int64_t>(accumulate_, n);
  if (parts <= 1) {
    pass(x, labels, ctx, false);
  } else {
    Device& dev = model_.device();
    const size_t count = model_.param_count();
    if (!grad_sum_.defined()) grad_sum_ = Tensor(dev, {static_cast<int64_t>(count)});
    const int64_t per_sample = x.numel() / n, targets = model_.targets_per_sample();
    Shape shape = x.shape();
    for (int64_t k = 0; k < parts; ++k) {
      const int64_t begin = n * k / parts, end = n * (k + 1) / parts;
      shape[0] = end - begin;
      const Tensor micro = Tensor::view_of(dev, x.data() + begin * per_sample, shape);
      StepContext c = ctx;
      c.first_sample = ctx.first_sample + begin;
      pass(micro, labels + begin * targets, c, /*accumulate=*/k > 0);  // the loss sums on the device
      // backward() overwrites the model's gradients: the first part's become the sum.
      if (k == 0)
        dev.copy(grad_sum_.data(), model_.grads().data(), count);
      else
        dev.add_inplace(grad_sum_.data(), model_.grads().data(), count);
    }
    dev.copy(model_.grads().data(), grad_sum_.data(), count);
  }
  // Reading the totals waits for everything queued: the gradients are complete when
  // this returns, the caller times the compute and hands the buffer to the
  // all-reduce. It is the step's one wait, after the whole backward pass is queued
  // (not between forward and backward, where a GPU would idle while the host queued).
  return totals_.read();
}

void TrainStep::update(int64_t global_batch, double lr, std::optional<double> grad_sq) {
  const double predictions = static_cast<double>(global_batch) * static_cast<double>(model_.targets_per_sample());
  const double max_norm = optimizer_.config().clip_grad_norm;
  // The gradient buffer is the all-reduced sum here: every rank, whatever its share,
  // computes the same norm and clips the same.
  if (max_norm > 0.0 && !grad_sq)
    grad_sq = model_.device().sum_squares(model_.grads().data(), model_.param_count());
  const double scale =
      gradient_scale(grad_sq.value_or(0.0), predictions, max_norm, max_norm > 0.0 ? &grad_norm_ : nullptr);
  optimizer_.step(model_.params(), model_.grads(), lr, scale);
}

LossResult TrainStep::run(const Tensor& x, const int32_t* labels, int64_t global_batch, double lr,
                          const StepContext& ctx, StepTimes* times) {
  const double t0 = times ? now_ms() : 0.0;
  const LossResult r = compute(x, labels, ctx);
  const double t1 = times ? now_ms() : 0.0;
  update(global_batch, lr);
  if (times) {
    times->compute_ms = t1 - t0;
    times->optimizer_ms = now_ms() - t1;
  }
  return r;
}

}  // namespace tandem
