#pragma once
// A layer in the torch/nn sense: it owns its output and input-gradient buffers (grown
// by capacity, so a varying local batch allocates nothing once warmed up) and views
// of its parameters and gradients inside the model's flat buffers.
//
// Gradient convention: backward() OVERWRITES this layer's parameter gradients, so the
// model never has to zero the gradient buffer; a step computed in micro-batches sets
// StepContext::accumulate_grads on every pass after the first, and backward() then
// ADDS to them (a GEMM's beta = 1, or GradScratch below), so the micro-batches sum in
// place without a copy of the whole gradient per micro-batch.
// The incoming dy may be modified in place (fused activations do), since the layer
// that produced it never reads it again.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/rng.hpp"
#include "engine/core/tensor.hpp"

namespace tandem {

// What a step tells its layers.
// Sums small per-channel statistics (batch norm's) over every worker's share of the
// global batch, so a layer computes what one worker with the whole batch would,
// however the batch is split. Every worker calls it the same number of times per
// step, those with an empty share too.
class BatchReducer {
public:
  virtual ~BatchReducer() = default;
  virtual void sum(double* data, size_t count) = 0;
};

// Told by Model::backward, layer by layer, that the parameter gradients from `offset`
// to the end of the gradient buffer are final (on a CPU, written): whoever all-reduces
// them in buckets starts those while the backward pass goes on
// (engine/train/sync/gradient_buckets.hpp). Of a step's micro-batches only the last
// pass tells.
class GradientsReady {
public:
  virtual ~GradientsReady() = default;
  virtual void ready_from(size_t offset) = 0;
};

struct StepContext {
  bool training = true;
  BatchReducer* reducer = nullptr;  // null: this worker's batch is the whole batch
  bool update_running_stats = true;  // false for steps that are not training (calibration)
  uint64_t seed = 0;         // per-iteration seed (dropout masks) ...
  // ... or, when set, where it lies in device memory (the fused step's scalars: its
  // high and low 32 bits as 2 doubles), so a captured step replays with the next
  // step's seed (kernels/dropout_seed.hpp).
  const double* seed_on_device = nullptr;
  int64_t first_sample = 0;  // position of this worker's first sample in the global batch
  // backward() adds to the parameter gradients instead of overwriting them (the
  // micro-batches after a step's first: engine/train/step.hpp).
  bool accumulate_grads = false;
  GradientsReady* grads_ready = nullptr;  // told as the gradients become final
};

// For a layer whose device op overwrites a parameter gradient: where that op writes
// (the gradient itself, or a scratch buffer while accumulating) and, after it, the
// scratch added in. The scratch is the size of that gradient alone (a norm's or a
// bias's, a convolution's weights), never the model's.
class GradScratch {
public:
  // Where the op writes `count` floats of the gradient at `grad`.
  float* target(Device& dev, float* grad, size_t count, bool accumulate) {
    if (!accumulate) return grad;
    buf_.ensure(dev, {static_cast<int64_t>(count)});
    return buf_.data();
  }
  // Adds what the op wrote into the gradient (nothing when not accumulating).
  void finish(Device& dev, float* grad, size_t count, bool accumulate) {
    if (accumulate) dev.add_inplace(grad, buf_.data(), count);
  }

private:
  Tensor buf_;
};

class Layer {
public:
  explicit Layer(Device& dev) : dev_(dev) {}
  virtual ~Layer() = default;
  virtual std::string describe() const = 0;
  // Per-sample output shape; the input shape was fixed at construction.
  virtual const Shape& output_shape() const = 0;
  virtual size_t param_count() const { return 0; }
  // Floats of the buffers a training step grows for one sample: its output and the
  // gradient that comes back through it (about the output's size). An estimate, for
  // the memory check before a run allocates (engine/train/memory_check.hpp).
  virtual double buffer_floats_per_sample() const { return 2.0 * static_cast<double>(shape_numel(output_shape())); }
  virtual void bind(float* params, float* grads) {}
  // The parameters AdamW leaves out of weight decay (biases, a norm's gain and shift),
  // appended to `out` as [base + offset, count) ranges of this layer's parameters.
  // Default: every parameter decays (weights, embeddings).
  virtual void no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const {}
  virtual void init_params(Rng& rng) {}
  // x: [batch, ...input shape]. Returns [batch, ...output shape].
  virtual const Tensor& forward(const Tensor& x, const StepContext& ctx) = 0;
  // dy: gradient of the loss w.r.t. the last forward's output. Returns dx (undefined
  // tensor when need_dx is false: the first layer skips that work).
  virtual const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) = 0;
  // State that is not a parameter but must survive a checkpoint (batch norm's running
  // statistics): appended to `out`; restored from `in` at `*at`, which advances.
  virtual void save_state(std::vector<double>& out) const {}
  virtual void load_state(const std::vector<double>& in, size_t* at) {}
  // Whether a training step through this layer can be captured once and replayed
  // (Device::begin_capture): not when it reads numbers back mid-step (batch norm's
  // sums). (Dropout reads the iteration's seed from StepContext::seed_on_device.)
  virtual bool capturable() const { return true; }
  // Whether its training pass depends on where this worker's samples sit in the global
  // batch (StepContext::first_sample): dropout's masks are keyed by it. A captured
  // step of a model none of whose layers do can be replayed at any position.
  virtual bool reads_sample_position() const { return false; }

protected:
  Device& dev_;
};

// Layers that hold others (a residual block, a transformer block, the model itself)
// lay their parts' parameters out one after the other. These walk the parts (pointers
// or unique_ptrs to layers) in that order and return the parameters they covered, so
// a caller can go on after them.
template <typename Parts>
size_t bind_in_order(const Parts& parts, float* params, float* grads) {
  size_t offset = 0;
  for (const auto& l : parts) {
    l->bind(params + offset, grads + offset);
    offset += l->param_count();
  }
  return offset;
}
template <typename Parts>
size_t no_decay_in_order(const Parts& parts, std::vector<std::pair<size_t, size_t>>& out, size_t base) {
  size_t offset = 0;
  for (const auto& l : parts) {
    l->no_decay_ranges(out, base + offset);
    offset += l->param_count();
  }
  return offset;
}

// Fills [p, p+n) with U(-bound, bound): torch's default init for Linear and Conv2d
// (kaiming_uniform with a = sqrt(5) gives bound = 1/sqrt(fan_in)).
void init_uniform(Device& dev, float* p, size_t n, float bound, Rng& rng);
// Fills [p, p+n) with N(0, stddev^2): GPT-2's init for embeddings and projections.
void init_normal(Device& dev, float* p, size_t n, float stddev, Rng& rng);

}  // namespace tandem
