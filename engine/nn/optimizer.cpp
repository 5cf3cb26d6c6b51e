#include "engine/nn/optimizer.hpp"

#include <cmath>

#include "engine/core/error.hpp"
#include "engine/nn/adamw.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"

namespace tandem {

std::unique_ptr<Optimizer> make_optimizer(Device& dev, const Model& model, const OptimizerConfig& cfg) {
  if (cfg.name == "sgd") return std::make_unique<Sgd>(dev, model.param_count(), cfg);
  if (cfg.name == "adamw") return std::make_unique<AdamW>(dev, model, cfg);
  TANDEM_FAIL_HINT("set optimizer = 'sgd' or 'adamw'", "unknown optimizer '", cfg.name, "'");
}

double gradient_scale(double grad_sq, double predictions, double max_norm, double* norm) {
  TANDEM_CHECK(predictions > 0, "optimizer step over ", predictions, " predictions");
  double mean_norm = 0.0;
  const double scale = mean_gradient_scale(grad_sq, predictions, max_norm, &mean_norm);
  if (norm) *norm = mean_norm;
  return scale;
}

StepRule Optimizer::rule() const {
  StepRule r;
  r.max_norm = cfg_.clip_grad_norm;
  if (cfg_.name == "adamw") {
    r.beta1 = cfg_.beta1;
    r.beta2 = cfg_.beta2;
  }
  return r;
}

void Optimizer::step(Tensor& params, const Tensor& grads, double lr, double grad_scale) {
  TANDEM_CHECK(grad_scale > 0.0, "optimizer step with gradient scale ", grad_scale);
  TANDEM_CHECK(params.numel() == grads.numel(), "parameter and gradient buffers differ in size");
  // The slots decide_step would fill, filled here: the same doubles (bias corrections
  // in double, then rounded by the kernels), so both ways update alike.
  const StepRule r = rule();
  const double t = static_cast<double>(steps_) + 1.0;
  const double v[] = {lr, 0.0, static_cast<double>(steps_), 0.0, 1.0, grad_scale, 0.0,
                      1.0 - std::pow(r.beta1, t), 1.0 - std::pow(r.beta2, t)};
  static_assert(sizeof(v) / sizeof(v[0]) == kStepBias2 + 1, "one value per slot up to the bias corrections");
  scalars_.write(dev_, kStepLr, v, kStepBias2 + 1);
  apply(params, grads, scalars_.on(dev_));
  ++steps_;
}

}  // namespace tandem
