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
  return r;
}

void Optimizer::bias_corrections(int64_t update, double* bc1, double* bc2) const {
  // In double, then rounded by the kernels: 1 - beta^t loses nothing for large t.
  // On the host in both ways of updating, so both round the same doubles.
  const bool adam = cfg_.name == "adamw";
  const double t = static_cast<double>(update);
  *bc1 = adam ? 1.0 - std::pow(cfg_.beta1, t) : 1.0;
  *bc2 = adam ? 1.0 - std::pow(cfg_.beta2, t) : 1.0;
}

void Optimizer::step(Tensor& params, const Tensor& grads, double lr, double grad_scale) {
  TANDEM_CHECK(grad_scale > 0.0, "optimizer step with gradient scale ", grad_scale);
  TANDEM_CHECK(params.numel() == grads.numel(), "parameter and gradient buffers differ in size");
  // The slots the kernels read, filled here for an update the caller decided.
  double v[kStepScale + 1] = {};
  v[kStepLr] = lr;
  bias_corrections(steps_ + 1, &v[kStepBias1], &v[kStepBias2]);
  v[kStepFinite] = 1.0;
  v[kStepScale] = grad_scale;
  scalars_.write(dev_, kStepLr, v, kStepScale + 1);
  apply(params, grads, scalars_.on(dev_));
  ++steps_;
}

}  // namespace tandem
