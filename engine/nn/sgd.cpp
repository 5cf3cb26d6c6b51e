#include "engine/nn/sgd.hpp"

#include "engine/core/error.hpp"

namespace tandem {

Sgd::Sgd(Device& dev, size_t count, const OptimizerConfig& cfg) : dev_(dev), cfg_(cfg) {
  TANDEM_CHECK_HINT(cfg.name == "sgd", "set optimizer = 'sgd'", "unknown optimizer '", cfg.name, "'");
  if (cfg.momentum != 0.0) velocity_ = Tensor(dev, {static_cast<int64_t>(count)});
}

void Sgd::step(Tensor& params, const Tensor& grads, double lr, int64_t samples) {
  TANDEM_CHECK(samples > 0, "optimizer step over ", samples, " samples");
  TANDEM_CHECK(params.numel() == grads.numel(), "parameter and gradient buffers differ in size");
  dev_.sgd_step(params.data(), grads.data(), velocity_.defined() ? velocity_.data() : nullptr,
                static_cast<size_t>(params.numel()), static_cast<float>(lr), static_cast<float>(cfg_.momentum),
                static_cast<float>(cfg_.weight_decay), static_cast<float>(1.0 / static_cast<double>(samples)),
                cfg_.nesterov);
}

}  // namespace tandem
