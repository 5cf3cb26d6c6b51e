#pragma once
// AdamW (Loshchilov and Hutter) with torch.optim.AdamW's semantics: decoupled weight
// decay, bias-corrected moments, eps outside the square root. Weight decay applies
// only to the model's parameter groups that take it (matrices and embeddings, as
// nanoGPT does; not biases and norms): one fused device pass per group.
#include <vector>

#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"

namespace tandem {

class AdamW final : public Optimizer {
public:
  AdamW(Device& dev, const Model& model, const OptimizerConfig& cfg);
  void apply(Tensor& params, const Tensor& grads, const double* step) override;
  std::vector<Tensor*> state() override { return {&m_, &v_}; }

private:
  std::vector<ParamRange> groups_;
  Tensor m_, v_;
};

}  // namespace tandem
