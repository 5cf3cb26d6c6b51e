#include "engine/nn/sgd.hpp"

#include "engine/core/error.hpp"

namespace tandem {

Sgd::Sgd(Device& dev, size_t count, const OptimizerConfig& cfg) : Optimizer(cfg), dev_(dev) {
  TANDEM_CHECK_HINT(cfg.name == "sgd", "set optimizer = 'sgd'", "Sgd built for optimizer '", cfg.name,
                    "' (a bug in tandem)");
  if (cfg.momentum != 0.0) velocity_ = Tensor(dev, {static_cast<int64_t>(count)});
}

void Sgd::step(Tensor& params, const Tensor& grads, double lr, double grad_scale) {
  TANDEM_CHECK(grad_scale > 0.0, "optimizer step with gradient scale ", grad_scale);
  TANDEM_CHECK(params.numel() == grads.numel(), "parameter and gradient buffers differ in size");
  dev_.sgd_step(params.data(), grads.data(), velocity_.defined() ? velocity_.data() : nullptr,
                static_cast<size_t>(params.numel()), static_cast<float>(lr), static_cast<float>(cfg_.momentum),
                static_cast<float>(cfg_.weight_decay), static_cast<float>(grad_scale), cfg_.nesterov);
  ++steps_;
}

std::vector<Tensor*> Sgd::state() {
  if (!velocity_.defined()) return {};
  return {&velocity_};
}

}  // namespace tandem
