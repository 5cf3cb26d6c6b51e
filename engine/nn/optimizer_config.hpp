#pragma once
// The optimizer's settings, owned by nn so that the optimizer needs nothing from
// training; engine/train/config.hpp holds one inside ExperimentConfig, and
// scripts/tandem/experiment.lua documents each key, its default and its range.
#include <string>

namespace tandem {

struct OptimizerConfig {
  std::string name = "sgd";
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
  bool nesterov = false;
  // Grouped sync (engine/train/sync/parameter_server.hpp): the momentum the server
  // applies to each segment's displacement at the meeting, stepping without momentum
  // inside; 0: momentum on every push.
  double slow_momentum = 0.7;
};

}  // namespace tandem
