#include "engine/train/evaluate.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/nn/loss.hpp"

namespace tandem {

EvalSums evaluate_range(Model& model, const Dataset& data, int64_t batch, int64_t begin, int64_t end) {
  Shape shape{batch};
  shape.insert(shape.end(), data.sample_shape().begin(), data.sample_shape().end());
  Tensor x(model.device(), shape);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<int64_t> indices(static_cast<size_t>(batch));
  SoftmaxCrossEntropy loss;
  StepContext ctx;
  ctx.training = false;
  EvalSums sums;
  for (int64_t start = begin; start < end; start += batch) {
    const int64_t n = std::min(batch, end - start);
    std::iota(indices.begin(), indices.begin() + n, start);
    shape[0] = n;
    // A view of the first n rows: the last batch may be shorter.
    Tensor xn = Tensor::view_of(model.device(), x.data(), shape);
    data.gather(indices.data(), n, xn.data(), labels.data());
    const LossResult r = loss.forward(model.forward(xn, ctx), labels.data(), false);
    sums.loss_sum += r.loss_sum;
    sums.correct += static_cast<double>(r.correct);
    sums.count += static_cast<double>(n);
  }
  return sums;
}

}  // namespace tandem
