#pragma once
// Builds the data set an experiment names.
#include <memory>

#include "engine/data/dataset.hpp"
#include "engine/train/config.hpp"

namespace tandem {

std::unique_ptr<Dataset> make_dataset(const DataConfig& cfg, bool train);

}  // namespace tandem
