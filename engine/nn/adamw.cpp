#include "engine/nn/adamw.hpp"

#include "engine/core/error.hpp"

namespace tandem {

AdamW::AdamW(Device& dev, const Model& model, const OptimizerConfig& cfg)
    : Optimizer(dev, cfg), groups_(model.param_groups()) {
  TANDEM_CHECK_HINT(cfg.beta1 >= 0.0 && cfg.beta1 < 1.0 && cfg.beta2 >= 0.0 && cfg.beta2 < 1.0 && cfg.eps > 0.0,
                    "use beta1 and beta2 in [0, 1) and eps > 0", "adamw: beta1 = ", cfg.beta1, ", beta2 = ",
                    cfg.beta2, ", eps = ", cfg.eps);
  const auto n = static_cast<int64_t>(model.param_count());
  m_ = Tensor(dev, {n});
  v_ = Tensor(dev, {n});
}

void AdamW::apply(Tensor& params, const Tensor& grads, const double* step) {
  TANDEM_CHECK(params.numel() == grads.numel() && params.numel() == m_.numel(),
               "adamw: parameter, gradient and moment buffers differ in size");
  for (const ParamRange& g : groups_)
    dev_.adamw_step(params.data() + g.offset, grads.data() + g.offset, m_.data() + g.offset, v_.data() + g.offset,
                    g.count, step, static_cast<float>(cfg_.beta1), static_cast<float>(cfg_.beta2),
                    static_cast<float>(cfg_.eps), g.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f);
}

}  // namespace tandem
