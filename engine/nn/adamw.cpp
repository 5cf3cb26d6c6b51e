#include "engine/nn/adamw.hpp"

#include <cmath>

#include "engine/core/error.hpp"

namespace tandem {

AdamW::AdamW(Device& dev, const Model& model, const OptimizerConfig& cfg)
    : Optimizer(cfg), dev_(dev), groups_(model.param_groups()) {
  TANDEM_CHECK_HINT(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0 && cfg.beta2 >= 0.0 && cfg.beta2 < 1.0 && cfg.eps > 0.0,
                    "use beta1 and beta2 in [0, 1) and eps > 0", "adamw: beta1 = ", cfg.beta1, ", beta2 = ",
                    cfg.beta2, ", eps = ", cfg.eps);
  const auto n = static_cast<int64_t>(model.param_count());
  m_ = Tensor(dev, {n});
  v_ = Tensor(dev, {n});
}

void AdamW::step(Tensor& params, const Tensor& grads, double lr, double grad_scale) {
  TANDEM_CHECK(grad_scale > 0.0, "optimizer step with gradient scale ", grad_scale);
  TANDEM_CHECK(params.numel() == grads.numel() && params.numel() == m_.numel(),
               "adamw: parameter, gradient and moment buffers differ in size");
  ++steps_;
  // In double, then rounded: 1 - beta^t loses nothing for large t this way.
  const double t = static_cast<double>(steps_);
  const auto bc1 = static_cast<float>(1.0 - std::pow(cfg_.beta1, t));
  const auto bc2 = static_cast<float>(1.0 - std::pow(cfg_.beta2, t));
  for (const ParamRange& g : groups_)
    dev_.adamw_step(params.data() + g.offset, grads.data() + g.offset, m_.data() + g.offset, v_.data() + g.offset,
                    g.count, static_cast<float>(lr), static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2),
                    static_cast<float>(cfg_.eps), g.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f,
                    static_cast<float>(grad_scale), bc1, bc2);
}

}  // namespace tandem
