#pragma once
// The scalars of one update held in a device's memory: kernels/step_rule.hpp's
// StepSlot doubles, which the optimizer kernels read (Device::sgd_step, adamw_step).
// The host writes what it knows (the learning rate, the bias corrections, the seed)
// and the device decides the rest, or the host writes everything for an update it
// decided itself.
#include "engine/core/tensor.hpp"
#include "kernels/step_rule.hpp"

namespace tandem {

class StepScalars {
public:
  // The block in `dev`'s memory (allocated on first use, zeroed).
  double* on(Device& dev);
  // Slots [first, first + count) from `values`, queued in order with the device's
  // work: the host does not wait.
  void write(Device& dev, int first, const double* values, int count);

private:
  Tensor buffer_;  // kStepSlots doubles in twice as many floats' storage
};

}  // namespace tandem
