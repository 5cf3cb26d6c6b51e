#pragma once
// Softmax cross-entropy with SUM reduction. SUM, not mean, because workers hold
// different numbers of samples: the sums add up across workers and the optimizer
// divides once by the global batch, which makes an uneven split exact.
#include <cstdint>

#include "engine/core/tensor.hpp"

namespace tandem {

struct LossResult {
  double loss_sum = 0.0;
  int64_t correct = 0;
};

class SoftmaxCrossEntropy {
public:
  // logits: [n, classes], or [n, seq, classes] for a sequence model (a row per
  // position). labels: host or device int32 per row (n, or n * seq), in the logits'
  // device memory space.
  // Fills the gradient (softmax - onehot) when `with_grad`.
  LossResult forward(const Tensor& logits, const int32_t* labels, bool with_grad);
  const Tensor& grad() const { return dlogits_; }

private:
  Tensor dlogits_;
};

}  // namespace tandem
