#include "engine/nn/loss.hpp"

namespace tandem {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, const int32_t* labels, bool with_grad) {
  Device& dev = logits.device();
  const int rows = static_cast<int>(logits.dim(0));
  const int classes = static_cast<int>(logits.numel() / std::max<int64_t>(rows, 1));
  if (with_grad) dlogits_.ensure(dev, {rows, classes});
  LossResult r;
  r.loss_sum = dev.softmax_xent(logits.data(), labels, rows, classes, with_grad ? dlogits_.data() : nullptr,
                                &r.correct);
  return r;
}

}  // namespace tandem
