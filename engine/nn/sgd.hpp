#pragma once
// SGD with momentum, weight decay and Nesterov, over the model's flat buffers, with
// torch.optim.SGD's semantics. Weight decay applies to every parameter (as torch's
// one parameter group does), unchanged from before AdamW's groups existed.
#include <cstdint>

#include "engine/nn/optimizer.hpp"

namespace tandem {

class Sgd final : public Optimizer {
public:
  Sgd(Device& dev, size_t count, const OptimizerConfig& cfg);
  void step(Tensor& params, const Tensor& grads, double lr, double grad_scale) override;
  std::vector<Tensor*> state() override;
  Tensor& velocity() { return velocity_; }

private:
  Device& dev_;
  Tensor velocity_;
};

}  // namespace tandem
