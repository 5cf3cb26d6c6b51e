#include "engine/train/evaluate.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/nn/loss.hpp"

namespace tandem {

EvalResult evaluate(Model& model, const Dataset& data, int64_t batch) {
  Shape shape{batch};
  shape.insert(shape.end(), data.sample_shape().begin(), data.sample_shape().end());
  Tensor x(model.device(), shape);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<int64_t> indices(static_cast<size_t>(batch));
  SoftmaxCrossEntropy loss;
  StepContext ctx;
  ctx.training = false;
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t start = 0; start < data.size(); start += batch) {
    const int64_t n = std::min(batch, data.size() - start);
    std::iota(indices.begin(), indices.begin() + n, start);
    shape[0] = n;
    // A view of the first n rows: the last batch may be shorter.
    Tensor xn = Tensor::view_of(model.device(), x.data(), shape);
    data.gather(indices.data(), n, xn.data(), labels.data());
    const LossResult r = loss.forward(model.forward(xn, ctx), labels.data(), false);
    loss_sum += r.loss_sum;
    correct += r.correct;
  }
  const double n = static_cast<double>(std::max<int64_t>(data.size(), 1));
  return {loss_sum / n, static_cast<double>(correct) / n};
}

}  // namespace tandem
