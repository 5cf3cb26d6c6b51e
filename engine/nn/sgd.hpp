#pragma once
// SGD with momentum, weight decay and Nesterov, over the model's flat buffers, with
// torch.optim.SGD's semantics. The gradient buffer holds SUMS over the samples that
// produced it; step() divides by that sample count (the global batch), which is what
// makes any split of the batch across workers give the same update.
#include <cstdint>

#include "engine/core/tensor.hpp"
#include "engine/nn/optimizer_config.hpp"

namespace tandem {

class Sgd {
public:
  Sgd(Device& dev, size_t count, const OptimizerConfig& cfg);
  void step(Tensor& params, const Tensor& grads, double lr, int64_t samples);
  Tensor& velocity() { return velocity_; }
  const OptimizerConfig& config() const { return cfg_; }

private:
  Device& dev_;
  OptimizerConfig cfg_;
  Tensor velocity_;
};

}  // namespace tandem
