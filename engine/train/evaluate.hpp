#pragma once
// Test-set evaluation, dropout off, in fixed-size batches. Workers each evaluate
// their share of the test set and sum the results, so evaluation takes 1/N of the
// time on N workers and every worker ends with the same accuracy.
#include <cstdint>
#include <vector>

#include "engine/data/dataset.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/train/device_input.hpp"

namespace tandem {

// Sums over targets, not samples: a language model's sample has seq_len of them, so
// loss_sum / count is the mean loss per token and correct / count the token accuracy
// (for a classifier, per sample as before).
struct EvalSums {
  double loss_sum = 0.0;
  double correct = 0.0;
  double count = 0.0;  // targets: samples * the data set's targets_per_sample()
};

// Evaluation's buffers (the batch, its labels, the loss's), kept from one evaluation
// to the next: after the first, an evaluation allocates no device memory (the model's
// buffers grow to the evaluation batch once), so the graphs a GPU replays the
// training step from, which hold raw pointers and are dropped when memory moves
// (engine/train/step.hpp), outlive it.
class Evaluator {
public:
  // Samples [begin, end) of input's data set. The input is the caller's to keep, so a
  // test set held on the device is uploaded once, not at every evaluation.
  EvalSums run(Model& model, DeviceInput& input, int64_t batch, int64_t begin, int64_t end);

private:
  Tensor x_, labels_;
  std::vector<int64_t> indices_;
  SoftmaxCrossEntropy loss_;
};

// One evaluation with buffers of its own.
EvalSums evaluate_range(Model& model, DeviceInput& input, int64_t batch, int64_t begin, int64_t end);
// The same through a DeviceInput made for this call (data.on_device = 'auto').
EvalSums evaluate_range(Model& model, const Dataset& data, int64_t batch, int64_t begin, int64_t end);

}  // namespace tandem
