#pragma once
// The optimizer's settings, owned by nn so that the optimizer needs nothing from
// training; engine/train/config.hpp holds one inside ExperimentConfig, and
// scripts/tandem/experiment.lua documents each key, its default and its range.
#include <string>

namespace tandem {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adamw
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
  bool nesterov = false;
  // adamw (torch.optim.AdamW's defaults): the moments' decay rates and the
  // denominator's floor.
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // Clip the mean gradient's global norm to this before every update
  // (torch.nn.utils.clip_grad_norm_); 0: no clipping. Computed on the all-reduced
  // gradient, so every split of the batch clips the same.
  double clip_grad_norm = 0.0;
  // Grouped sync (engine/train/sync/parameter_server.hpp): the momentum the server
  // applies to each segment's displacement at the meeting, stepping without momentum
  // inside; 0: momentum on every push.
  double slow_momentum = 0.7;
};

}  // namespace tandem
