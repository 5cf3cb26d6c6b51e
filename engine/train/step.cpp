#include "engine/train/step.hpp"

#include "engine/core/clock.hpp"

namespace tandem {

LossResult TrainStep::compute(const Tensor& x, const int32_t* labels, const StepContext& ctx) {
  const LossResult r = loss_.forward(model_.forward(x, ctx), labels, /*with_grad=*/true);
  model_.backward(loss_.grad(), ctx);
  // The gradients are complete when this returns: the caller times the compute and
  // hands the buffer to the all-reduce (a no-op on the CPU).
  model_.device().synchronize();
  return r;
}

void TrainStep::update(int64_t global_batch, double lr) {
  sgd_.step(model_.params(), model_.grads(), lr, global_batch);
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
