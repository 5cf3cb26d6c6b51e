#include "engine/train/evaluate.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/nn/loss.hpp"
#include "engine/train/device_input.hpp"

namespace tandem {

EvalSums evaluate_range(Model& model, const Dataset& data, int64_t batch, int64_t begin, int64_t end) {
  DeviceInput input(model.device(), data);
  return evaluate_range(model, input, batch, begin, end);
}

EvalSums evaluate_range(Model& model, DeviceInput& input, int64_t batch, int64_t begin, int64_t end) {
  Evaluator evaluator;
  return evaluator.run(model, input, batch, begin, end);
}

EvalSums Evaluator::run(Model& model, DeviceInput& input, int64_t batch, int64_t begin, int64_t end) {
  const Dataset& data = input.data();
  indices_.resize(static_cast<size_t>(batch));
  StepContext ctx;
  ctx.training = false;
  const int64_t targets = data.targets_per_sample();
  TANDEM_CHECK_HINT(model.targets_per_sample() == targets,
                    "use a model that predicts every position of a text window (model = 'gpt') with a text data set, "
                    "and a classifier with the others",
                    "the model makes ", model.targets_per_sample(), " predictions per sample, but data set ",
                    data.name(), " has ", targets, " labels per sample");
  EvalSums sums;
  for (int64_t start = begin; start < end; start += batch) {
    const int64_t n = std::min(batch, end - start);  // the last batch may be shorter
    std::iota(indices_.begin(), indices_.begin() + n, start);
    input.fill(indices_.data(), n, x_, labels_);
    // One row of logits per target: a language model's [n, seq, vocab] is n * seq rows.
    const Tensor& logits = model.forward(x_, ctx);
    // Read back per batch: the input's staging ring needs a wait between fills
    // (device_input.hpp), and an evaluation is rare enough not to matter.
    const LossResult r = loss_.forward(logits.reshape({n * targets, logits.numel() / (n * targets)}),
                                       DeviceInput::labels_of(labels_), false, model.classes());
    sums.loss_sum += r.loss_sum;
    sums.correct += static_cast<double>(r.correct);
    sums.count += static_cast<double>(n * targets);
  }
  return sums;
}

}  // namespace tandem
