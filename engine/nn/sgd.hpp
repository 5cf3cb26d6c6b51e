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
  void apply(Tensor& params, const Tensor& grads, const double* step) override;
  std::vector<Tensor*> state() override;
  Tensor& velocity() { return velocity_; }

private:
  Tensor velocity_;
};

}  // namespace tandem
