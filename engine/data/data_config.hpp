#pragma once
// The data set's settings, owned by data so that the readers need nothing from
// training; engine/train/config.hpp holds one inside ExperimentConfig, and
// scripts/tandem/experiment.lua documents each key.
#include <cstdint>
#include <string>

#include "engine/core/tensor.hpp"

namespace tandem {

struct DataConfig {
  std::string name = "fashion-mnist";  // fashion-mnist | synthetic
  std::string dir = "/usr/share/datasets/fashion-mnist";
  // synthetic only: shape of one sample, number of classes, train/test sizes.
  Shape shape = {1, 28, 28};
  int classes = 10;
  int64_t train_size = 60000;
  int64_t test_size = 10000;
  uint64_t seed = 7;
};

}  // namespace tandem
