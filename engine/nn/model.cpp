#include "engine/nn/model.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/core/error.hpp"
#include "engine/nn/activation.hpp"
#include "engine/nn/avgpool.hpp"
#include "engine/nn/batchnorm.hpp"
#include "engine/nn/conv2d.hpp"
#include "engine/nn/embedding.hpp"
#include "engine/nn/layernorm.hpp"
#include "engine/nn/linear.hpp"
#include "engine/nn/lm_head.hpp"
#include "engine/nn/maxpool2d.hpp"
#include "engine/nn/residual.hpp"
#include "engine/nn/shape_ops.hpp"
#include "engine/nn/transformer_block.hpp"

namespace tandem {

namespace {

struct Args {
  const LayerSpec& spec;
  double get(const char* key, double fallback) const {
    auto it = spec.args.find(key);
    return it == spec.args.end() ? fallback : it->second;
  }
  double need(const char* key) const {
    auto it = spec.args.find(key);
    if (it == spec.args.end())
      TANDEM_FAIL_HINT("add " + std::string(key) + "= to the layer", spec.type, " layer at ", spec.where,
                       " is missing argument '", key, "'");
    return it->second;
  }
  int need_int(const char* key) const { return as_int(key, need(key)); }
  int get_int(const char* key, int fallback) const { return as_int(key, get(key, fallback)); }
  // A size: an integer >= 1 (`fallback` when absent, if given).
  int positive(const char* key, int fallback = 0) const {
    const int v = fallback > 0 ? get_int(key, fallback) : need_int(key);
    if (v < 1)
      TANDEM_FAIL_HINT("give " + std::string(key) + "= a positive integer", spec.type, " layer at ", spec.where,
                       ": argument '", key, "' must be >= 1, got ", v);
    return v;
  }
  int as_int(const char* key, double v) const {
    if (v != std::floor(v) || std::abs(v) > 1e9)
      TANDEM_FAIL(spec.type, " layer at ", spec.where, ": argument '", key, "' must be an integer, got ", v);
    return static_cast<int>(v);
  }
};

bool is_relu(const std::vector<LayerSpec>& layers, size_t i) { return i < layers.size() && layers[i].type == "relu"; }

struct BuiltLayer {
  std::unique_ptr<Layer> layer;
  double macs = 0.0;  // multiply-adds per sample, forward
  bool has_params = false;
};

// The embedding a tied lm_head shares its weight with: the nearest one before it in
// the same list.
Embedding* nearest_embedding(const std::vector<BuiltLayer>& before, const LayerSpec& ls) {
  for (size_t j = before.size(); j-- > 0;)
    if (auto* e = dynamic_cast<Embedding*>(before[j].layer.get())) return e;
  TANDEM_FAIL_HINT("put an embedding before it in the same layer list, or write lm_head{tied = false}",
                   "tied lm_head at ", ls.where, " has no embedding before it to share the weight with");
}

float dropout_arg(const Args& a) {
  const double p = a.get("dropout", 0.0);
  if (!(p >= 0.0 && p < 1.0))
    TANDEM_FAIL_HINT("give dropout= a probability in [0, 1)", a.spec.type, " layer at ", a.spec.where,
                     ": dropout must be in [0, 1), got ", p);
  return static_cast<float>(p);
}

// The layers of `specs`, in order, for inputs of `shape` (updated to the output
// shape of the last). A residual block builds its body and shortcut the same way.
// classes: the data's, the default vocabulary of an embedding or lm_head.
std::vector<BuiltLayer> build_layers(Device& dev, const std::vector<LayerSpec>& specs, Shape& shape, int classes) {
  std::vector<BuiltLayer> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    BuiltLayer built;
    const LayerSpec& ls = specs[i];
    Args a{ls};
    std::unique_ptr<Layer> layer;
    const int64_t in_numel = shape_numel(shape);
    if (ls.type == "linear") {
      const int64_t in = a.get_int("in", static_cast<int>(in_numel));
      if (in != in_numel)
        TANDEM_FAIL_HINT("drop in= to let the engine infer it, or fix the layer before", "linear layer at ", ls.where,
                         " says in=", in, " but its input ", shape_str(shape), " has ", in_numel, " values");
      const bool fuse = is_relu(specs, i + 1);
      const int out = a.need_int("out");
      layer = std::make_unique<Linear>(dev, in, out, a.get("bias", 1) != 0,
                                       fuse ? Activation::relu : Activation::none);
      built.macs = static_cast<double>(in) * out;
      if (fuse) ++i;
    } else if (ls.type == "conv2d") {
      if (shape.size() != 3)
        TANDEM_FAIL("conv2d layer at ", ls.where, " needs a [channels, height, width] input, got ", shape_str(shape));
      const int ic = a.get_int("in_channels", static_cast<int>(shape[0]));
      if (ic != shape[0])
        TANDEM_FAIL("conv2d layer at ", ls.where, " says in_channels=", ic, " but its input is ", shape_str(shape));
      const bool fuse = is_relu(specs, i + 1);
      const int k = a.need_int("kernel");
      auto conv = std::make_unique<Conv2d>(dev, shape, a.need_int("out_channels"), k, a.get_int("stride", 1),
                                           a.get_int("padding", 0), a.get("bias", 1) != 0,
                                           fuse ? Activation::relu : Activation::none);
      built.macs = static_cast<double>(shape_numel(conv->output_shape())) * ic * k * k;
      layer = std::move(conv);
      if (fuse) ++i;
    } else if (ls.type == "relu") {
      layer = std::make_unique<ReLU>(dev, shape);
    } else if (ls.type == "maxpool2d") {
      if (shape.size() != 3)
        TANDEM_FAIL("maxpool2d layer at ", ls.where, " needs a [channels, height, width] input, got ",
                    shape_str(shape));
      const int k = a.need_int("kernel");
      layer = std::make_unique<MaxPool2d>(dev, shape, k, a.get_int("stride", k));
    } else if (ls.type == "batchnorm") {
      if (shape.size() != 3 && shape.size() != 1)
        TANDEM_FAIL("batchnorm layer at ", ls.where, " needs a [channels, height, width] or [features] input, got ",
                    shape_str(shape));
      layer = std::make_unique<BatchNorm>(dev, shape, static_cast<float>(a.get("eps", 1e-5)),
                                          static_cast<float>(a.get("momentum", 0.1)), a.get("sync", 1) != 0);
    } else if (ls.type == "avgpool") {
      layer = std::make_unique<GlobalAvgPool>(dev, shape);
    } else if (ls.type == "residual") {
      Shape body_shape = shape, short_shape = shape;
      LayerList body, shortcut;
      for (auto* part : {&ls.body, &ls.shortcut}) {
        const bool is_body = part == &ls.body;
        for (BuiltLayer& b : build_layers(dev, *part, is_body ? body_shape : short_shape, classes)) {
          built.macs += b.macs;
          (is_body ? body : shortcut).push_back(std::move(b.layer));
        }
      }
      layer = std::make_unique<Residual>(dev, shape, std::move(body), std::move(shortcut));
    } else if (ls.type == "flatten") {
      layer = std::make_unique<Flatten>(dev, shape);
    } else if (ls.type == "dropout") {
      layer = std::make_unique<Dropout>(dev, shape, static_cast<float>(a.need("p")), i);
    } else if (ls.type == "embedding") {
      const int seq_len = a.positive("seq_len");
      if (shape.size() != 1 || shape[0] > seq_len)
        TANDEM_FAIL_HINT("feed it token sequences of at most seq_len tokens (data.shape = {seq})", "embedding layer at ",
                         ls.where, " with seq_len=", seq_len, " got input ", shape_str(shape));
      const int vocab = a.positive("vocab", classes);
      const int padded = a.positive("padded_vocab", vocab);
      if (padded < vocab)
        TANDEM_FAIL_HINT("pad the vocabulary up to a round size (models/gpt.lua: vocab_multiple = 64)",
                         "embedding layer at ", ls.where, ": padded_vocab ", padded, " is smaller than vocab ", vocab);
      layer = std::make_unique<Embedding>(dev, shape, vocab, a.positive("n_embd"), seq_len, dropout_arg(a), i, padded);
    } else if (ls.type == "transformer_block") {
      if (shape.size() != 2)
        TANDEM_FAIL_HINT("put it after an embedding", "transformer_block layer at ", ls.where,
                         " needs a [seq, n_embd] input, got ", shape_str(shape));
      const int n_head = a.positive("n_head");
      if (shape[1] % n_head != 0)
        TANDEM_FAIL_HINT("choose n_head dividing n_embd", "transformer_block layer at ", ls.where, ": n_embd ",
                         shape[1], " does not split into n_head=", n_head, " heads");
      auto block = std::make_unique<TransformerBlock>(dev, shape, n_head, dropout_arg(a), a.positive("n_layer", 1), i);
      built.macs = block->macs_per_sample();
      layer = std::move(block);
    } else if (ls.type == "layernorm") {
      const double eps = a.get("eps", 1e-5);
      if (!(eps > 0.0))
        TANDEM_FAIL_HINT("give eps= a small positive number (1e-5 is torch's default)", "layernorm layer at ", ls.where,
                         ": eps must be > 0, got ", eps);
      layer = std::make_unique<LayerNorm>(dev, shape, static_cast<float>(eps));
    } else if (ls.type == "lm_head") {
      if (shape.size() != 2)
        TANDEM_FAIL_HINT("put it after the transformer blocks", "lm_head layer at ", ls.where,
                         " needs a [seq, n_embd] input, got ", shape_str(shape));
      Embedding* tied = a.get("tied", 1) != 0 ? nearest_embedding(out, ls) : nullptr;
      const int vocab = tied ? tied->vocab() : a.positive("vocab", classes);
      if (tied && tied->n_embd() != shape[1])
        TANDEM_FAIL_HINT("end the blocks at the embedding's width, or write lm_head{tied = false}", "tied lm_head at ",
                         ls.where, " gets ", shape[1], " features but its embedding has n_embd ", tied->n_embd());
      layer = std::make_unique<LmHead>(dev, shape, vocab, tied);
      built.macs = static_cast<double>(shape[0]) * shape[1] * layer->output_shape().back();  // padded columns too
    } else {
      TANDEM_FAIL_HINT("use linear, relu, conv2d, maxpool2d, batchnorm, avgpool, residual, flatten, dropout, "
                       "embedding, transformer_block, layernorm or lm_head",
                       "unknown layer type '", ls.type, "' at ", ls.where);
    }
    built.has_params = layer->param_count() > 0;
    shape = layer->output_shape();
    built.layer = std::move(layer);
    out.push_back(std::move(built));
  }
  return out;
}

// The model's layers, checked: some, and ending in one value per class.
std::vector<BuiltLayer> build_model_layers(Device& dev, const ModelSpec& spec) {
  TANDEM_CHECK_HINT(!spec.layers.empty(), "return nn.model{layers = {...}} from the model file", "model '",
                    spec.name, "' has no layers");
  Shape shape = spec.input;
  std::vector<BuiltLayer> built = build_layers(dev, spec.layers, shape, spec.classes);
  // A head tied to a padded table ends in more columns than classes; it predicts the
  // first `classes` of them (the loss leaves the rest out).
  const auto* head = dynamic_cast<const LmHead*>(built.back().layer.get());
  const bool padded = head && head->vocab() == spec.classes && shape.size() >= 2 && shape.back() > spec.classes;
  if (!padded && shape_numel(shape) != spec.classes && (shape.size() < 2 || shape.back() != spec.classes))
    TANDEM_FAIL_HINT("make the last layer produce one value per class (a sequence model: one per class at every "
                     "position)", "model '", spec.name, "' ends in ", shape_str(shape), " but the data set has ",
                     spec.classes, " classes");
  return built;
}

}  // namespace

ModelFootprint model_footprint(const ModelSpec& spec) {
  ModelFootprint f;
  f.buffer_floats_per_sample = static_cast<double>(shape_numel(spec.input));  // the batch itself
  for (const BuiltLayer& b : build_model_layers(cpu_device(), spec)) {
    f.params += static_cast<int64_t>(b.layer->param_count());
    f.buffer_floats_per_sample += b.layer->buffer_floats_per_sample();
  }
  return f;
}

Model::Model(Device& dev, const ModelSpec& spec, uint64_t seed)
    : dev_(dev), name_(spec.name), input_(spec.input), classes_(spec.classes) {
  bool seen_params = false;
  for (BuiltLayer& b : build_model_layers(dev, spec)) {
    if (b.has_params && !seen_params) {  // where backward can stop
      first_layer_macs_ = b.macs;
      first_param_layer_ = layers_.size();
      seen_params = true;
    }
    macs_per_sample_ += b.macs;
    layers_.push_back(std::move(b.layer));
  }

  Shape out = spec.input;
  if (!layers_.empty()) out = layers_.back()->output_shape();
  // One target per row of logits: the whole output for a classifier, each position's
  // row (of classes, or of a padded vocabulary's columns) for a sequence model.
  const int64_t row = shape_numel(out) == spec.classes ? spec.classes : (out.empty() ? 1 : out.back());
  targets_per_sample_ = spec.classes > 0 && row > 0 ? shape_numel(out) / row : 1;
  size_t total = 0;
  for (auto& l : layers_) total += l->param_count();
  params_ = Tensor(dev, {static_cast<int64_t>(total)});
  grads_ = Tensor(dev, {static_cast<int64_t>(total)});
  bind_layers();
  Rng rng(seed);
  for (auto& l : layers_) l->init_params(rng);
}

void Model::bind_layers() { bind_in_order(layers_, params_.data(), grads_.data()); }

void Model::place_grads(float* storage) {
  TANDEM_CHECK(storage != nullptr, "Model::place_grads was given no storage (a bug in tandem)");
  dev_.copy(storage, grads_.data(), param_count());
  grads_ = Tensor::view_of(dev_, storage, {static_cast<int64_t>(param_count())});
  bind_layers();
}

const Tensor& Model::forward(const Tensor& x, const StepContext& ctx) {
  const Tensor* h = &x;
  for (auto& l : layers_) h = &l->forward(*h, ctx);
  return *h;
}

void Model::backward(const Tensor& dlogits, const StepContext& ctx) {
  const Tensor* g = &dlogits;
  size_t end = param_count();  // where layer i's parameters end
  for (size_t i = layers_.size(); i-- > first_param_layer_;) {
    g = &layers_[i]->backward(*g, i > first_param_layer_, ctx);
    // Layers lay their parameters out in order, so the backward pass finishes the
    // gradient buffer from its end: everything from layer i's first one on is final.
    const size_t n = layers_[i]->param_count();
    end -= n;
    if (ctx.grads_ready && n > 0) ctx.grads_ready->ready_from(end);
  }
}

std::vector<size_t> Model::gradient_ready_points() const {
  std::vector<size_t> points;
  size_t end = param_count();
  for (size_t i = layers_.size(); i-- > first_param_layer_;) {
    const size_t n = layers_[i]->param_count();
    end -= n;
    if (n > 0) points.push_back(end);
  }
  return points;
}

std::vector<ParamRange> Model::param_groups() const {
  std::vector<std::pair<size_t, size_t>> no_decay;
  const size_t offset = no_decay_in_order(layers_, no_decay, 0);
  std::sort(no_decay.begin(), no_decay.end());
  std::vector<ParamRange> out;
  auto push = [&out](size_t at, size_t count, bool decay) {
    if (count == 0) return;
    if (!out.empty() && out.back().decay == decay && out.back().offset + out.back().count == at)
      out.back().count += count;
    else
      out.push_back({at, count, decay});
  };
  size_t at = 0;
  for (const auto& [begin, count] : no_decay) {
    TANDEM_CHECK(begin >= at && begin + count <= offset, "parameter groups: no-decay range [", begin, ", ",
                 begin + count, ") overlaps another or runs past the ", offset, " parameters (a bug in tandem)");
    push(at, begin - at, true);
    push(begin, count, false);
    at = begin + count;
  }
  push(at, offset - at, true);
  return out;
}

std::string Model::summary() const {
  std::ostringstream os;
  os << "model '" << name_ << "': input " << shape_str(input_) << ", " << param_count() << " parameters";
  for (auto& l : layers_) os << "\n  " << l->describe() << "  [" << l->param_count() << " params]";
  return os.str();
}

bool Model::reads_sample_position() const {
  for (const auto& l : layers_)
    if (l->reads_sample_position()) return true;
  return false;
}

bool Model::capturable() const {
  for (const auto& l : layers_)
    if (!l->capturable()) return false;
  return true;
}

std::vector<double> Model::layer_state() const {
  std::vector<double> out;
  for (const auto& l : layers_) l->save_state(out);
  return out;
}

void Model::load_layer_state(const std::vector<double>& state) {
  size_t at = 0;
  for (auto& l : layers_) l->load_state(state, &at);
  TANDEM_CHECK(at == state.size(), "layer state: ", state.size(), " values given, the model's layers hold ", at,
               " (the checkpoint is not of this model)");
}

}  // namespace tandem
