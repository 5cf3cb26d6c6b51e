#pragma once
// A sequential model built from a ModelSpec. All parameters live in one flat buffer
// and all gradients in another (layers hold views), so the optimizer is one fused
// pass and the all-reduce is one collective over one contiguous buffer.
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layer.hpp"
#include "engine/nn/spec.hpp"

namespace tandem {

// What a model needs, from its spec alone: its layers are built (which checks
// them against the input and the classes, as the Model does) but no parameter is
// allocated. For the memory check before a run allocates anything.
struct ModelFootprint {
  int64_t params = 0;
  double buffer_floats_per_sample = 0.0;  // the input and every layer's buffers, for one sample
};
ModelFootprint model_footprint(const ModelSpec& spec);

// A contiguous range of the flat parameter buffer and whether weight decay applies
// to it (AdamW's two parameter groups, as nanoGPT: matrices and embeddings decay,
// biases and norms do not).
struct ParamRange {
  size_t offset = 0, count = 0;
  bool decay = true;
};

class Model {
public:
  // Builds the layers, folding a ReLU that follows a linear or conv2d layer into it,
  // and initialises the parameters deterministically from `seed`.
  Model(Device& dev, const ModelSpec& spec, uint64_t seed);

  // x: [batch, ...input]. Returns logits [batch, classes] ([batch, seq, classes] for a
  // language model: engine/nn/lm_head.hpp).
  const Tensor& forward(const Tensor& x, const StepContext& ctx);
  // dlogits: gradient of the loss w.r.t. the logits of the last forward (modified in
  // place). Overwrites the gradient buffer (adds to it with ctx.accumulate_grads),
  // telling ctx.grads_ready after each layer with parameters.
  void backward(const Tensor& dlogits, const StepContext& ctx);
  // Where backward() tells ctx.grads_ready that the gradients are final from: each
  // layer's first parameter, in the order it tells (descending).
  std::vector<size_t> gradient_ready_points() const;

  Tensor& params() { return params_; }
  Tensor& grads() { return grads_; }
  // Moves the gradients into `storage`: param_count() floats on this model's device,
  // owned by the caller and alive as long as the model is used. Whoever all-reduces
  // the gradients can then keep them in one buffer with what travels beside them.
  // The values are carried over; the model's own gradient buffer is released.
  void place_grads(float* storage);
  size_t param_count() const { return static_cast<size_t>(params_.numel()); }
  const Shape& input_shape() const { return input_; }
  int classes() const { return classes_; }
  // Predictions (loss terms) per sample: 1 for a classifier, seq_len for a language
  // model that predicts every next token. The loss sums over all of them, and the
  // optimizer divides by global_batch * targets_per_sample (the mean per token, as
  // PyTorch's cross_entropy).
  int64_t targets_per_sample() const { return targets_per_sample_; }
  // The whole parameter buffer in order, split where weight decay starts or stops.
  std::vector<ParamRange> param_groups() const;
  Device& device() const { return dev_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // The layers' non-parameter state (batch norm's running statistics), in order.
  std::vector<double> layer_state() const;
  // Whether a training step can be captured and replayed (Layer::capturable).
  bool capturable() const;
  // Whether a training pass depends on the worker's position in the global batch
  // (Layer::reads_sample_position: dropout).
  bool reads_sample_position() const;
  void load_layer_state(const std::vector<double>& state);
  // One line per layer with output shape and parameter count.
  std::string summary() const;
  // Multiply-adds of one sample's forward pass.
  double forward_macs_per_sample() const { return macs_per_sample_; }
  // FLOPs one training sample really executes: forward, weight gradients, and input
  // gradients of every layer but the first with parameters (nothing reads those).
  double train_flops_per_sample() const { return 2.0 * (3.0 * macs_per_sample_ - first_layer_macs_); }
  // The backward pass's share of those (2/3 where none are counted): the pace at which
  // the simulator's and an emulated device's gradients become final (bucket_plan.hpp).
  double backward_share() const {
    const double train = train_flops_per_sample();
    return train > 0.0 ? 1.0 - 2.0 * macs_per_sample_ / train : 2.0 / 3.0;
  }

private:
  // Points every layer's parameter and gradient views into the flat buffers.
  void bind_layers();

  Device& dev_;
  std::string name_;
  Shape input_;
  int classes_;
  int64_t targets_per_sample_ = 1;
  std::vector<std::unique_ptr<Layer>> layers_;
  Tensor params_, grads_;
  double macs_per_sample_ = 0.0, first_layer_macs_ = 0.0;
  // Backward stops here: layers before it have no parameters, so no gradient is owed.
  size_t first_param_layer_ = 0;
};

}  // namespace tandem
