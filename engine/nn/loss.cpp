#include "engine/nn/loss.hpp"

#include <algorithm>

namespace tandem {

namespace {
constexpr size_t kFloats = 2 * sizeof(double) / sizeof(float);  // the 2 doubles' storage
}  // namespace

double* LossTotals::on(Device& dev) {
  if (!buffer_.defined() || &buffer_.device() != &dev) buffer_ = Tensor(dev, {kFloats});
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
                                  bool accumulate) {
  Device& dev = logits.device();
  // Classes are the last dimension: [n, classes] for a classifier, [n, seq, vocab]
  // for a language model, whose every position is a row with a label of its own.
  const int classes = static_cast<int>(logits.rank() > 1 ? logits.shape().back() : 1);
  const int rows = static_cast<int>(logits.numel() / std::max(classes, 1));
  if (with_grad) dlogits_.ensure(dev, logits.shape());
  dev.softmax_xent_into(logits.data(), labels, rows, classes, with_grad ? dlogits_.data() : nullptr, totals.on(dev),
                        accumulate);
}

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, bool with_grad) {
  forward(logits, labels, with_grad, totals_, false);
  return totals_.read();
}

}  // namespace tandem
