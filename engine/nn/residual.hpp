#pragma once
// A residual block (He et al., 2016): y = relu(body(x) + shortcut(x)), the shortcut
// being the identity or a few layers of its own (a strided 1x1 convolution and a
// batch norm when the block changes shape). The block owns its sub-layers and lays
// their parameters out one after the other in its share of the model's flat buffer.
#include <memory>
#include <vector>

#include "engine/nn/layer.hpp"

namespace tandem {

using LayerList = std::vector<std::unique_ptr<Layer>>;

class Residual final : public Layer {
public:
  // body must not be empty; shortcut may be (the identity). Their outputs must have
  // the same shape (and, for the identity, the input's).
  Residual(Device& dev, const Shape& in, LayerList body, LayerList shortcut);
  std::string describe() const override;
  const Shape& output_shape() const override { return out_shape_; }
  size_t param_count() const override;
  double buffer_floats_per_sample() const override;
  void bind(float* params, float* grads) override;
  void no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const override;
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;
  void save_state(std::vector<double>& out) const override;
  void load_state(const std::vector<double>& in, size_t* at) override;
  bool capturable() const override;
  bool reads_sample_position() const override;
  // The sub-layers, in the order their parameters lie (body, then shortcut).
  const LayerList& body() const { return body_; }
  const LayerList& shortcut() const { return shortcut_; }

private:
  LayerList body_, shortcut_;
  Shape out_shape_;
  Tensor y_, g_, dx_;
};

}  // namespace tandem
