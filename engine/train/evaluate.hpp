#pragma once
// Test-set evaluation, dropout off, in fixed-size batches. Workers each evaluate
// their share of the test set and sum the results, so evaluation takes 1/N of the
// time on N workers and every worker ends with the same accuracy.
#include <cstdint>

#include "engine/data/dataset.hpp"
#include "engine/nn/model.hpp"

namespace tandem {

struct EvalSums {
  double loss_sum = 0.0;
  double correct = 0.0;
  double count = 0.0;
};

// Samples [begin, end) of the data set.
EvalSums evaluate_range(Model& model, const Dataset& data, int64_t batch, int64_t begin, int64_t end);

}  // namespace tandem
