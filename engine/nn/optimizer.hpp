#pragma once
// What training needs from an optimizer, whichever it is (SGD, AdamW): one update of
// the flat parameter buffer from the flat gradient buffer, and the state a checkpoint
// must carry for the next update to be the one an uninterrupted run would take.
//
// The gradient buffer holds SUMS (over the samples of the global batch and, for a
// language model, over every position); grad_scale turns it into the mean gradient
// (1 / (global_batch * targets_per_sample)) and carries the clipping factor too, so
// neither costs a pass over the parameters of its own.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/tensor.hpp"
#include "engine/nn/optimizer_config.hpp"
#include "engine/nn/step_scalars.hpp"

namespace tandem {

class Model;

class Optimizer {
public:
  virtual ~Optimizer() = default;
  // One update the caller decided to take, with this learning rate and gradient scale.
  void step(Tensor& params, const Tensor& grads, double lr, double grad_scale);
  // One update whose scalars are in device memory (kernels/step_rule.hpp: the
  // learning rate, the gradient's scale, the bias corrections), maybe decided there:
  // the device skips it when step[kStepFinite] is 0. The update count is then the
  // caller's to keep (set_steps), once it has read whether the update was taken.
  virtual void apply(Tensor& params, const Tensor& grads, const double* step) = 0;
  // The constant decide_step needs: the clipping norm.
  StepRule rule() const;
  // AdamW's bias corrections of update number `update` (counting from 1): 1 -
  // beta^update in double, which the kernels round (1 for SGD).
  void bias_corrections(int64_t update, double* bc1, double* bc2) const;
  // The buffers an update reads and writes besides the parameters, each one float per
  // parameter, in a fixed order (SGD: its momentum, when it has one; AdamW: m then v).
  virtual std::vector<Tensor*> state() = 0;
  // Updates taken so far (AdamW's bias correction counts them); restored by a resume.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  const OptimizerConfig& config() const { return cfg_; }

protected:
  Optimizer(Device& dev, const OptimizerConfig& cfg) : dev_(dev), cfg_(cfg) {}
  Device& dev_;
  OptimizerConfig cfg_;
  int64_t steps_ = 0;

private:
  StepScalars scalars_;  // step()'s, written by the host for each update
};

// The optimizer cfg.name says, for this model's parameters (AdamW takes the model's
// parameter groups: no weight decay for biases and norms).
std::unique_ptr<Optimizer> make_optimizer(Device& dev, const Model& model, const OptimizerConfig& cfg);

// The scale that makes a SUM gradient over `predictions` loss terms the mean, times
// the clipping factor of torch.nn.utils.clip_grad_norm_ when max_norm > 0: the mean
// gradient's norm is sqrt(grad_sq) / predictions; past max_norm it is scaled by
// max_norm / (norm + 1e-6). *norm (when given) gets the mean gradient's norm before
// clipping.
double gradient_scale(double grad_sq, double predictions, double max_norm, double* norm = nullptr);

}  // namespace tandem
