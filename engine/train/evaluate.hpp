#pragma once
// Test-set evaluation: the whole set in fixed-size batches, dropout off.
#include <cstdint>

#include "engine/data/dataset.hpp"
#include "engine/nn/model.hpp"

namespace tandem {

struct EvalResult {
  double loss = 0.0;      // mean over the set
  double accuracy = 0.0;  // fraction correct
};

EvalResult evaluate(Model& model, const Dataset& data, int64_t batch);

}  // namespace tandem
