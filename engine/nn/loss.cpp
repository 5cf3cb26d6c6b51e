#include "engine/nn/loss.hpp"

#include <algorithm>

#include "engine/core/error.hpp"

namespace tandem {

namespace {
constexpr size_t kStatFloats = 2 * sizeof(double) / sizeof(float);  // the 2 doubles' storage
}  // namespace

double* LossTotals::on(Device& dev) {
  if (!buffer_.defined() || &buffer_.device() != &dev) buffer_ = Tensor(dev, {kStatFloats});
  return reinterpret_cast<double*>(buffer_.data());
}

LossResult LossTotals::read() const {
  LossResult r;
  if (!buffer_.defined()) return r;
  double host[2] = {0.0, 0.0};
  buffer_.device().read_doubles(host, reinterpret_cast<const double*>(buffer_.data()), 2);
  r.loss_sum = host[0];
  r.correct = static_cast<int64_t>(host[1] + 0.5);
  return r;
}

void SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, bool with_grad, LossTotals& totals,
                                  bool accumulate, int predicted) {
  Device& dev = logits.device();
  // Rows are the last dimension: [n, classes] for a classifier, [n, seq, vocab]
  // for a language model, whose every position is a row with a label of its own.
  const int ld = static_cast<int>(logits.rank() > 1 ? logits.shape().back() : 1);
  const int rows = static_cast<int>(logits.numel() / std::max(ld, 1));
  const int classes = predicted > 0 ? predicted : ld;
  TANDEM_CHECK(classes <= ld, "the loss predicts ", classes, " classes but the logits ", shape_str(logits.shape()),
               " have rows of ", ld, " (a bug in tandem: the model's classes against its output)");
  if (with_grad) dlogits_.ensure(dev, logits.shape());
  dev.softmax_xent_into(logits.data(), labels, rows, classes, ld, with_grad ? dlogits_.data() : nullptr,
                        totals.on(dev), accumulate);
}

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, bool with_grad, int predicted) {
  forward(logits, labels, with_grad, totals_, false, predicted);
  return totals_.read();
}

}  // namespace tandem
