#include "engine/nn/loss.hpp"

namespace tandem {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, bool with_grad) {
  Device& dev = logits.device();
  // Classes are the last dimension: [n, classes] for a classifier, [n, seq, vocab]
  // for a language model, whose every position is a row with a label of its own.
  const int classes = static_cast<int>(logits.rank() > 1 ? logits.shape().back() : 1);
  const int rows = static_cast<int>(logits.numel() / std::max(classes, 1));
  if (with_grad) dlogits_.ensure(dev, logits.shape());
  LossResult r;
  r.loss_sum = dev.softmax_xent(logits.data(), labels, rows, classes, with_grad ? dlogits_.data() : nullptr,
                                &r.correct);
  return r;
}

}  // namespace tandem
