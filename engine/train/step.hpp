#pragma once
// One training step of one worker over its local batch: forward, SUM loss, backward,
// optimizer step. Shared by the trainer, the golden tests and the benchmarks so all
// of them measure and check the same code.
//
// Gradient accumulation: with accumulate = K the local batch is computed in K
// micro-batches (sizes differing by at most one; fewer when the batch has fewer than
// K samples) whose gradients are summed, so a worker whose share does not fit in
// memory at once still takes it. Each micro-batch keeps its samples' positions in the
// global batch (StepContext::first_sample), so dropout masks, and with them the
// result, do not depend on K: the summed gradient is one pass's, to float rounding.
//
// The update divides the summed gradient by the predictions it stands for
// (global_batch * targets_per_sample: the mean per sample, or per token for a
// language model) and clips the mean gradient's global norm (clip_grad_norm), folded
// into one scale factor (engine/nn/optimizer.hpp).
#include <cstdint>
#include <optional>

#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"

namespace tandem {

struct StepTimes {
  double compute_ms = 0.0;    // forward + loss + backward
  double optimizer_ms = 0.0;  // the parameter update
};

class TrainStep {
public:
  TrainStep(Model& model, Optimizer& optimizer, int64_t accumulate = 1);
  // x: [local_batch, ...input]; labels: local_batch * targets_per_sample ints.
  // `global_batch` is the number of samples the (summed) gradient stands for.
  LossResult run(const Tensor& x, const int32_t* labels, int64_t global_batch, double lr, const StepContext& ctx,
                 StepTimes* times = nullptr);
  // The two halves of run(), for workers that all-reduce the gradient in between:
  // forward + loss + backward, in micro-batches (the gradient buffer then holds this
  // worker's SUM) ...
  LossResult compute(const Tensor& x, const int32_t* labels, const StepContext& ctx);
  // ... and the update from the (summed) gradient of `global_batch` samples.
  // grad_sq: that gradient's squared norm, when the caller computed it already
  // (clipping needs it; without it, update computes it when clipping is on).
  void update(int64_t global_batch, double lr, std::optional<double> grad_sq = std::nullopt);
  // The mean gradient's global norm before clipping, at the last update (0 until one
  // ran, and when clipping is off: it is only computed for clipping).
  double last_grad_norm() const { return grad_norm_; }
  Optimizer& optimizer() { return optimizer_; }

private:
  // Forward, loss into totals_ (added to them with `accumulate`), backward.
  void pass(const Tensor& x, const int32_t* labels, const StepContext& ctx, bool accumulate);

  Model& model_;
  Optimizer& optimizer_;
  int64_t accumulate_;
  SoftmaxCrossEntropy loss_;
  LossTotals totals_;  // the local batch's loss sum and correct count, on the device
  Tensor grad_sum_;  // accumulate > 1: the micro-batches' gradients summed
  double grad_norm_ = 0.0;
};

}  // namespace tandem
