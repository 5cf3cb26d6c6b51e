#pragma once
// One training step of one worker over its local batch: forward, SUM loss, backward,
// optimizer step. Shared by the trainer, the golden test and the benchmarks so all
// three measure and check the same code.
#include <cstdint>

#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"

namespace tandem {

struct StepTimes {
  double compute_ms = 0.0;    // forward + loss + backward
  double optimizer_ms = 0.0;  // the parameter update
};

class TrainStep {
public:
  TrainStep(Model& model, Sgd& sgd) : model_(model), sgd_(sgd) {}
  // x: [local_batch, ...input]; labels: local_batch ints. `global_batch` is the number
  // of samples the (summed) gradient stands for: the optimizer divides by it.
  LossResult run(const Tensor& x, const int32_t* labels, int64_t global_batch, double lr, const StepContext& ctx,
                 StepTimes* times = nullptr);
  // The two halves of run(), for workers that all-reduce the gradient in between:
  // forward + loss + backward (the gradient buffer then holds this worker's SUM) ...
  LossResult compute(const Tensor& x, const int32_t* labels, const StepContext& ctx);
  // ... and the update from the (summed) gradient of `global_batch` samples.
  void update(int64_t global_batch, double lr);

private:
  Model& model_;
  Sgd& sgd_;
  SoftmaxCrossEntropy loss_;
};

}  // namespace tandem
