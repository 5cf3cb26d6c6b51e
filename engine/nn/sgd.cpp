#include "engine/nn/sgd.hpp"

#include "engine/core/error.hpp"

namespace tandem {

Sgd::Sgd(Device& dev, size_t count, const OptimizerConfig& cfg) : Optimizer(dev, cfg) {
  TANDEM_CHECK_HINT(cfg.name == "sgd", "set optimizer = 'sgd'", "Sgd built for optimizer '", cfg.name,
                    "' (a bug in tandem)");
  if (cfg.momentum != 0.0) velocity_ = Tensor(dev, {static_cast<int64_t>(count)});
}

void Sgd::apply(Tensor& params, const Tensor& grads, const double* step) {
  TANDEM_CHECK(params.numel() == grads.numel(), "parameter and gradient buffers differ in size");
  dev_.sgd_step(params.data(), grads.data(), velocity_.defined() ? velocity_.data() : nullptr,
                static_cast<size_t>(params.numel()), step, static_cast<float>(cfg_.momentum),
                static_cast<float>(cfg_.weight_decay), cfg_.nesterov);
}

std::vector<Tensor*> Sgd::state() {
  if (!velocity_.defined()) return {};
  return {&velocity_};
}

}  // namespace tandem
