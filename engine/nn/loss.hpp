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

// A loss sum and correct count kept in device memory: forward passes add to it as
// they are queued, and read() brings it to the host once, when the number is needed
// (after the rest of the step is queued: a GPU then never waits for the host).
class LossTotals {
public:
  // The 2 doubles in `dev`'s memory (allocated on first use).
  double* on(Device& dev);
  // The totals, waiting for the device to finish what adds to them.
  LossResult read() const;

private:
  Tensor buffer_;  // 2 doubles in 4 floats' storage
};

class SoftmaxCrossEntropy {
public:
  // logits: [n, classes], or [n, seq, classes] for a sequence model (a row per
  // position). labels: int32 per row (n, or n * seq) in the logits' device memory.
  // Fills the gradient (softmax - onehot) when `with_grad`. The loss sum and correct
  // count go to `totals`: overwriting it, or added with `accumulate`. predicted: the
  // classes, the first columns of each row (0: all of them); fewer than the row's
  // columns where a vocabulary is padded (engine/nn/embedding.hpp): the rest are
  // never predicted, and their gradient is 0.
  void forward(const Tensor& logits, const int32_t* labels, bool with_grad, LossTotals& totals, bool accumulate,
               int predicted = 0);
  // The same, read back at once (waits for the device).
  LossResult forward(const Tensor& logits, const int32_t* labels, bool with_grad, int predicted = 0);
  const Tensor& grad() const { return dlogits_; }

private:
  Tensor dlogits_;
  LossTotals totals_;  // the read-back form's
};

}  // namespace tandem
