#include "engine/train/evaluate.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/nn/loss.hpp"
#include "engine/train/device_input.hpp"

namespace tandem {

EvalSums evaluate_range(Model& model, const Dataset& data, int64_t batch, int64_t begin, int64_t end) {
  Tensor x;
  std::vector<int32_t> labels;
  std::vector<int64_t> indices(static_cast<size_t>(batch));
  DeviceInput input(model.device());
  SoftmaxCrossEntropy loss;
  StepContext ctx;
  ctx.training = false;
  EvalSums sums;
  for (int64_t start = begin; start < end; start += batch) {
    const int64_t n = std::min(batch, end - start);  // the last batch may be shorter
    std::iota(indices.begin(), indices.begin() + n, start);
    input.fill(data, indices.data(), n, x, labels);
    const LossResult r = loss.forward(model.forward(x, ctx), labels.data(), false);
    sums.loss_sum += r.loss_sum;
    sums.correct += static_cast<double>(r.correct);
    sums.count += static_cast<double>(n);
  }
  return sums;
}

}  // namespace tandem
