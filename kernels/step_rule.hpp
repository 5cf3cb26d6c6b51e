#pragma once
// The scalars of one optimizer update, held in device memory (an array of doubles,
// indexed by StepSlot) so the update's kernels read them there rather than take
// them as arguments. Two things need that:
//  - the fused step (engine/train/step.hpp) decides on the device whether the step
//    is finite and what the gradient's scale is, so the host queues the whole step
//    without waiting to read a number back;
//  - a step captured in a CUDA graph is replayed with the arguments it was captured
//    with: whatever changes from step to step (the learning rate, the update count)
//    must come from memory the host writes before each replay.
// decide_step() is shared, word for word, by the CPU device and a one-thread CUDA
// kernel (plain C++ here, CUDA-annotated under nvcc), so both decide alike.
#include <cmath>

#include "kernels/host_device.hpp"

namespace tandem {

// Where each scalar lives in the block. The host writes the first kStepHostSlots
// before the step (what it knows: the learning rate, the loss terms, the iteration's
// seed, and AdamW's bias corrections for both outcomes of the step before, which the
// host may not have read yet: a skipped step does not advance the update count); the
// rest are decided on the device by decide_step(), or written by the host for an
// update it decided itself (Optimizer::step).
enum StepSlot : int {
  kStepLr = 0,          // host: the learning rate
  kStepPredictions,     // host: the loss terms the summed gradient stands for (global batch x targets)
  kStepSeedHigh,        // host: the iteration's seed (dropout masks), its high 32 bits ...
  kStepSeedLow,         // ... and its low ones (kernels/dropout_seed.hpp)
  kStepBiasIfSkipped1,  // host: 1 - beta1^(u + 1), u the updates taken if the unread step before was skipped
  kStepBiasIfSkipped2,  //   (or when every step before was read): 1 - beta2^(u + 1)
  kStepBiasIfTaken1,    // host: the same if that step was taken (u one more)
  kStepBiasIfTaken2,
  kStepPending,         // host: 1 when the step before is unread: its kStepFinite, still in the block, chooses
  kStepHostSlots,
  kStepBias1 = kStepHostSlots,  // decided: AdamW's bias corrections (1 for SGD)
  kStepBias2,
  kStepGradSq,   // the summed gradient's squared norm (Device::sum_squares_into)
  kStepFinite,   // decided: 1 to update, 0 to skip (a NaN or Inf in the loss or the gradient)
  kStepScale,    // decided: the gradient's scale, 1 / predictions times the clipping factor
  kStepNorm,     // decided: the mean gradient's norm before clipping
  kStepLoss,     // decided: the loss sum, copied from the loss totals
  kStepCorrect,  // decided: the correct count, copied likewise
  kStepSlots
};
// The slots a step's result is read from: kStepBias1 to the end.
constexpr int kStepResultSlots = kStepSlots - kStepBias1;

// The constant of the rule, fixed for a run (the optimizer's configuration).
struct StepRule {
  double max_norm = 0.0;  // clip_grad_norm; 0: no clipping
};

// The scale that makes a SUM gradient over `predictions` loss terms the mean, times
// the clipping factor of torch.nn.utils.clip_grad_norm_ when max_norm > 0 (the mean
// gradient's norm is sqrt(grad_sq) / predictions; past max_norm it is scaled by
// max_norm / (norm + 1e-6)). *norm gets the mean gradient's norm before clipping.
TANDEM_HOST_DEVICE inline double mean_gradient_scale(double grad_sq, double predictions, double max_norm,
                                                     double* norm) {
  using std::isfinite;
  using std::sqrt;
  const double scale = 1.0 / predictions;
  const double mean_norm = sqrt(grad_sq) * scale;
  *norm = mean_norm;
  if (max_norm <= 0.0 || !isfinite(mean_norm)) return scale;
  const double coef = max_norm / (mean_norm + 1e-6);
  return coef < 1.0 ? scale * coef : scale;
}

// From the host slots, kStepGradSq, the step before's kStepFinite and the loss totals
// (2 doubles: the loss sum and the correct count), the decided slots. A step whose
// loss or gradient is not finite is skipped.
TANDEM_HOST_DEVICE inline void decide_step(double* s, const double* totals, StepRule rule) {
  using std::isfinite;
  // The step before decided whether the update count moved; its flag is still here.
  const bool taken_before = s[kStepPending] != 0.0 && s[kStepFinite] != 0.0;
  s[kStepBias1] = taken_before ? s[kStepBiasIfTaken1] : s[kStepBiasIfSkipped1];
  s[kStepBias2] = taken_before ? s[kStepBiasIfTaken2] : s[kStepBiasIfSkipped2];
  s[kStepLoss] = totals[0];
  s[kStepCorrect] = totals[1];
  const bool finite = isfinite(totals[0]) && isfinite(s[kStepGradSq]);
  s[kStepFinite] = finite ? 1.0 : 0.0;
  double norm = 0.0;
  s[kStepScale] = mean_gradient_scale(s[kStepGradSq], s[kStepPredictions], rule.max_norm, &norm);
  s[kStepNorm] = norm;
}

}  // namespace tandem
