#include "engine/nn/residual.hpp"

#include <sstream>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

const Tensor& chain_forward(LayerList& layers, const Tensor& x, const StepContext& ctx) {
  const Tensor* h = &x;
  for (auto& l : layers) h = &l->forward(*h, ctx);
  return *h;
}

// Backward through a chain; the first layer computes dx only when asked.
const Tensor& chain_backward(LayerList& layers, const Tensor& dy, bool need_dx, const StepContext& ctx) {
  const Tensor* g = &dy;
  for (size_t i = layers.size(); i-- > 0;) g = &layers[i]->backward(*g, i > 0 || need_dx, ctx);
  return *g;
}

}  // namespace

Residual::Residual(Device& dev, const Shape& in, LayerList body, LayerList shortcut)
    : Layer(dev), body_(std::move(body)), shortcut_(std::move(shortcut)) {
  TANDEM_CHECK(!body_.empty(), "a residual block needs at least one layer in its body");
  out_shape_ = body_.back()->output_shape();
  const Shape& other = shortcut_.empty() ? in : shortcut_.back()->output_shape();
  TANDEM_CHECK_HINT(other == out_shape_,
                    shortcut_.empty() ? "give the block a shortcut (e.g. a 1x1 conv2d with the body's stride) that "
                                        "produces the body's shape"
                                      : "make the shortcut produce the body's shape",
                    "residual block: the body gives ", shape_str(out_shape_), " but the ",
                    shortcut_.empty() ? "identity shortcut" : "shortcut", " gives ", shape_str(other));
}

std::string Residual::describe() const {
  std::ostringstream os;
  os << "residual(relu(body + " << (shortcut_.empty() ? "x" : "shortcut") << ")) -> " << shape_str(out_shape_);
  for (auto& l : body_) os << "\n    body: " << l->describe();
  for (auto& l : shortcut_) os << "\n    shortcut: " << l->describe();
  return os.str();
}

size_t Residual::param_count() const {
  size_t n = 0;
  for (auto* list : {&body_, &shortcut_})
    for (auto& l : *list) n += l->param_count();
  return n;
}

// The body's and shortcut's buffers, and the join's output, its gradient and the
// input gradient it sums.
double Residual::buffer_floats_per_sample() const {
  double n = 3.0 * static_cast<double>(shape_numel(out_shape_));
  for (auto* list : {&body_, &shortcut_})
    for (auto& l : *list) n += l->buffer_floats_per_sample();
  return n;
}

void Residual::bind(float* params, float* grads) {
  const size_t body = bind_in_order(body_, params, grads);
  bind_in_order(shortcut_, params + body, grads + body);
}

void Residual::no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const {
  const size_t body = no_decay_in_order(body_, out, base);
  no_decay_in_order(shortcut_, out, base + body);
}

void Residual::init_params(Rng& rng) {
  for (auto* list : {&body_, &shortcut_})
    for (auto& l : *list) l->init_params(rng);
}

const Tensor& Residual::forward(const Tensor& x, const StepContext& ctx) {
  const Tensor& h = chain_forward(body_, x, ctx);
  const Tensor& s = shortcut_.empty() ? x : chain_forward(shortcut_, x, ctx);
  y_.ensure(dev_, h.shape());
  dev_.add_relu(h.data(), s.data(), y_.data(), static_cast<size_t>(y_.numel()));
  return y_;
}

const Tensor& Residual::backward(const Tensor& dy, bool need_dx, const StepContext& ctx) {
  // Through the join's ReLU, then down both paths; their input gradients add up.
  g_.ensure(dev_, dy.shape());
  dev_.copy(g_.data(), dy.data(), static_cast<size_t>(dy.numel()));
  dev_.act_backward(y_.data(), g_.data(), static_cast<size_t>(g_.numel()), Activation::relu);
  const Tensor& d_body = chain_backward(body_, g_, need_dx, ctx);
  const Tensor& d_short = shortcut_.empty() ? g_ : chain_backward(shortcut_, g_, need_dx, ctx);
  if (!need_dx) return dx_ = Tensor();
  dx_.ensure(dev_, d_body.shape());
  dev_.add(d_body.data(), d_short.data(), dx_.data(), static_cast<size_t>(dx_.numel()));
  return dx_;
}

void Residual::save_state(std::vector<double>& out) const {
  for (const auto& l : body_) l->save_state(out);
  for (const auto& l : shortcut_) l->save_state(out);
}

void Residual::load_state(const std::vector<double>& in, size_t* at) {
  for (auto& l : body_) l->load_state(in, at);
  for (auto& l : shortcut_) l->load_state(in, at);
}

bool Residual::reads_sample_position() const {
  for (const auto& l : body_)
    if (l->reads_sample_position()) return true;
  for (const auto& l : shortcut_)
    if (l->reads_sample_position()) return true;
  return false;
}

bool Residual::capturable() const {
  for (const auto& l : body_)
    if (!l->capturable()) return false;
  for (const auto& l : shortcut_)
    if (!l->capturable()) return false;
  return true;
}

}  // namespace tandem
