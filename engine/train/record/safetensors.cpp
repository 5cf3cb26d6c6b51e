#include "engine/train/record/safetensors.hpp"

#include "engine/core/log.hpp"

#include <cstring>
#include <string_view>
#include <nlohmann/json.hpp>

#include "engine/nn/embedding.hpp"
#include "engine/nn/residual.hpp"
#include "engine/train/record/run_dir.hpp"

namespace tandem {

namespace {

// A tensor of the flat parameter buffer is a view of it (`params`, count floats); a
// layer's state, computed here, owns its bytes.
struct NamedTensor {
  std::string name, dtype;  // F32 | I64
  std::vector<int64_t> shape;
  const float* params = nullptr;
  size_t count = 0;
  std::string owned;
  std::string_view bytes() const {
    return params ? std::string_view(reinterpret_cast<const char*>(params), count * sizeof(float)) : owned;
  }
};

// Parameters: a view of the flat buffer, which outlives the tensor list.
NamedTensor f32(const std::string& name, std::vector<int64_t> shape, const float* data, size_t count) {
  return {name, "F32", std::move(shape), data, count, {}};
}
// Layer state: copied, as it lives in a temporary.
NamedTensor owned_f32(const std::string& name, std::vector<int64_t> shape, const float* data, size_t count) {
  return {name, "F32", std::move(shape), nullptr, 0,
          std::string(reinterpret_cast<const char*>(data), count * sizeof(float))};
}

// One spec layer's tensors; `p` points at its parameters in the flat buffer.
// Returns false for a layer kind with no naming here.
bool layer_tensors(const LayerSpec& ls, const Layer& layer, const std::string& prefix, const float* p,
                   int64_t iterations, std::vector<NamedTensor>& out) {
  const auto arg = [&](const char* key, double fallback) {
    const auto it = ls.args.find(key);
    return it == ls.args.end() ? fallback : it->second;
  };
  const int64_t n = static_cast<int64_t>(layer.param_count());
  if (ls.type == "linear" || ls.type == "conv2d") {
    const bool conv = ls.type == "conv2d";
    const int64_t outs = static_cast<int64_t>(arg(conv ? "out_channels" : "out", 0));
    const int64_t k = conv ? static_cast<int64_t>(arg("kernel", 1)) : 1;
    const bool bias = arg("bias", 1) != 0;
    const int64_t weights = n - (bias ? outs : 0), ins = weights / (outs * k * k);
    out.push_back(f32(prefix + "weight", conv ? std::vector<int64_t>{outs, ins, k, k} : std::vector<int64_t>{outs, ins},
                      p, static_cast<size_t>(weights)));
    if (bias) out.push_back(f32(prefix + "bias", {outs}, p + weights, static_cast<size_t>(outs)));
    return true;
  }
  if (ls.type == "batchnorm") {
    const int64_t c = n / 2;
    out.push_back(f32(prefix + "weight", {c}, p, static_cast<size_t>(c)));
    out.push_back(f32(prefix + "bias", {c}, p + c, static_cast<size_t>(c)));
    std::vector<double> state;  // running mean, then running variance
    layer.save_state(state);
    const std::vector<float> stats(state.begin(), state.end());
    out.push_back(owned_f32(prefix + "running_mean", {c}, stats.data(), static_cast<size_t>(c)));
    out.push_back(owned_f32(prefix + "running_var", {c}, stats.data() + c, static_cast<size_t>(c)));
    out.push_back({prefix + "num_batches_tracked", "I64", {}, nullptr, 0,
                   std::string(reinterpret_cast<const char*>(&iterations), sizeof iterations)});
    return true;
  }
  return n == 0;  // flatten, relu, dropout, pooling: nothing to name
}

// A sequence of spec layers and the engine's layers built from them (a ReLU folded
// into the linear or conv2d layer before it has no layer of its own), named
// "<prefix><i>." by their position in the spec; a residual block's sub-layers
// "<prefix><i>.body.<j>." and "<prefix><i>.shortcut.<j>.". `offset` walks the flat
// buffer, `built` counts the layers used. False, with *why, for a layer kind that has
// no naming here.
bool sequence_tensors(const std::vector<LayerSpec>& specs, const std::vector<const Layer*>& layers,
                      const std::string& prefix, const float* params, int64_t iterations, size_t* offset,
                      size_t* built, std::vector<NamedTensor>& out, std::string* why) {
  size_t used = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const LayerSpec& ls = specs[i];
    if (ls.type == "relu" && i > 0 && (specs[i - 1].type == "linear" || specs[i - 1].type == "conv2d")) continue;
    if (used >= layers.size()) break;
    const Layer& layer = *layers[used++];
    const std::string name = prefix + std::to_string(i) + ".";
    if (const auto* block = dynamic_cast<const Residual*>(&layer); block && ls.type == "residual") {
      std::vector<const Layer*> body, shortcut;
      for (const auto& l : block->body()) body.push_back(l.get());
      for (const auto& l : block->shortcut()) shortcut.push_back(l.get());
      size_t inner = 0;
      if (!sequence_tensors(ls.body, body, name + "body.", params, iterations, offset, &inner, out, why)) return false;
      size_t inner_short = 0;
      if (!sequence_tensors(ls.shortcut, shortcut, name + "shortcut.", params, iterations, offset, &inner_short, out,
                            why))
        return false;
      if (inner != body.size() || inner_short != shortcut.size()) {
        *why = "the residual block at " + ls.where + " does not match its spec's layers";
        return false;
      }
      continue;
    }
    if (!layer_tensors(ls, layer, name, params + *offset, iterations, out)) {
      *why = "layer " + name.substr(0, name.size() - 1) + " (" + ls.type + ", at " + ls.where +
             ") has no PyTorch naming in the safetensors export yet (linear, conv2d, batchnorm, residual and "
             "layers without parameters have)";
      return false;
    }
    *offset += layer.param_count();
  }
  *built += used;
  return true;
}

// The spec layer as the metadata's layer list has it: type, arguments, and a
// residual block's body and shortcut.
nlohmann::json layer_json(const LayerSpec& ls) {
  nlohmann::json j = {{"type", ls.type}, {"args", ls.args}};
  if (ls.type == "residual") {
    j["body"] = nlohmann::json::array();
    j["shortcut"] = nlohmann::json::array();
    for (const LayerSpec& b : ls.body) j["body"].push_back(layer_json(b));
    for (const LayerSpec& c : ls.shortcut) j["shortcut"].push_back(layer_json(c));
  }
  return j;
}

// A GPT (models/gpt.lua: embedding, transformer blocks, layernorm, lm_head), named as
// nanoGPT's state_dict. Returns the parameters named, 0 where the layers are not in that order.
size_t gpt_tensors(const ModelSpec& spec, const Model& model, const float* p, std::vector<NamedTensor>& out) {
  const float* const start = p;
  const auto& layers = model.layers();
  const size_t n = spec.layers.size();
  if (n < 3 || layers.size() != n || spec.layers[n - 2].type != "layernorm" || spec.layers[n - 1].type != "lm_head")
    return 0;
  for (size_t i = 1; i + 2 < n; ++i)
    if (spec.layers[i].type != "transformer_block") return 0;
  const auto* emb = dynamic_cast<const Embedding*>(layers[0].get());
  if (!emb) return 0;
  // A padded table (engine/nn/embedding.hpp) is written as its vocab rows, the
  // shape Hugging Face's GPT-2 and PyTorch expect; its padding, never read, is left
  // out (init_from puts a file's rows back into a padded table).
  const int64_t c = emb->n_embd(), vocab = emb->vocab(), padding = emb->padded_vocab() - vocab;
  const int64_t seq_len = static_cast<int64_t>(emb->param_count()) / c - vocab - padding;
  for (size_t i = 1; i + 2 < n; ++i)  // the layout below, or nothing is read
    if (layers[i]->param_count() != static_cast<size_t>(12 * c * c + 13 * c)) return 0;
  if (layers[n - 2]->param_count() != static_cast<size_t>(2 * c)) return 0;
  const auto take = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    out.push_back(f32(name, std::move(shape), p, static_cast<size_t>(count)));
    p += count;
  };
  take("transformer.wte.weight", {vocab, c});
  p += padding * c;
  take("transformer.wpe.weight", {seq_len, c});
  for (size_t b = 0; b + 3 < n; ++b) {  // engine/nn/transformer_block.hpp's order
    const std::string h = "transformer.h." + std::to_string(b) + ".";
    take(h + "ln_1.weight", {c});
    take(h + "ln_1.bias", {c});
    take(h + "attn.c_attn.weight", {3 * c, c});
    take(h + "attn.c_attn.bias", {3 * c});
    take(h + "attn.c_proj.weight", {c, c});
    take(h + "attn.c_proj.bias", {c});
    take(h + "ln_2.weight", {c});
    take(h + "ln_2.bias", {c});
    take(h + "mlp.c_fc.weight", {4 * c, c});
    take(h + "mlp.c_fc.bias", {4 * c});
    take(h + "mlp.c_proj.weight", {c, 4 * c});
    take(h + "mlp.c_proj.bias", {c});
  }
  take("transformer.ln_f.weight", {c});
  take("transformer.ln_f.bias", {c});
  // A tied head is wte itself: written once (safetensors refuses shared tensors).
  if (layers[n - 1]->param_count() > 0)
    take("lm_head.weight", {static_cast<int64_t>(layers[n - 1]->param_count()) / c, c});
  return static_cast<size_t>(p - start);
}

// The model's tensors as the file names them, in file order; false with *why where
// a layer kind has no naming.
bool named_tensors(const ModelSpec& spec, const Model& model, const std::vector<float>& params, int64_t iterations,
                   std::vector<NamedTensor>& tensors, std::string* why) {
  const auto& layers = model.layers();
  size_t built = 0, offset = 0;
  const bool gpt = !spec.layers.empty() && spec.layers[0].type == "embedding";
  if (gpt) {
    offset = gpt_tensors(spec, model, params.data(), tensors);
    if (offset == 0) {
      *why = "a model starting with an embedding is named as nanoGPT's only when its layers are embedding, "
             "transformer_block..., layernorm, lm_head (as models/gpt.lua builds it)";
      return false;
    }
    built = layers.size();
  }
  if (!gpt) {
    std::vector<const Layer*> list;
    for (const auto& l : layers) list.push_back(l.get());
    if (!sequence_tensors(spec.layers, list, "", params.data(), iterations, &offset, &built, tensors, why))
      return false;
  }
  if (built != layers.size() || offset != params.size()) {
    *why = "the model's " + std::to_string(layers.size()) + " layers and " + std::to_string(params.size()) +
           " parameters do not match its spec's layers (" + std::to_string(built) + " layers, " +
           std::to_string(offset) + " parameters named)";
    return false;
  }
  return true;
}

}  // namespace

std::vector<SafetensorsEntry> safetensors_entries(const ModelSpec& spec, const Model& model,
                                                  const std::vector<float>& params, std::string* why) {
  std::vector<NamedTensor> tensors;
  if (!named_tensors(spec, model, params, 0, tensors, why)) return {};
  std::vector<SafetensorsEntry> out;
  for (NamedTensor& t : tensors)
    out.push_back({t.name, t.dtype, t.shape, t.params ? static_cast<int64_t>(t.params - params.data()) : -1});
  return out;
}

std::string safetensors_bytes(const ModelSpec& spec, const Model& model, const std::vector<float>& params,
                              int64_t iterations, std::string* why) {
  std::vector<NamedTensor> tensors;
  if (!named_tensors(spec, model, params, iterations, tensors, why)) return "";
  nlohmann::json header = nlohmann::json::object();
  // The model file's layers, so that a reader can build the equivalent nn.Sequential
  // (tools/golden/safetensors_model.py does). Metadata values are strings.
  nlohmann::json layer_list = nlohmann::json::array();
  for (const LayerSpec& ls : spec.layers) layer_list.push_back(layer_json(ls));
  header["__metadata__"] = {{"format", "pt"},
                            {"model", spec.name},
                            {"iterations", std::to_string(iterations)},
                            {"layers", layer_list.dump()}};
  std::string data;
  for (const NamedTensor& t : tensors) {
    const std::string_view bytes = t.bytes();
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const uint64_t length = text.size();
  std::string out(sizeof length, '\0');
  std::memcpy(out.data(), &length, sizeof length);  // little-endian, as on every machine tandem runs on
  return out + text + data;
}

void export_safetensors(const std::string& path, const ModelSpec& spec, const Model& model,
                        const std::vector<float>& params, int64_t iterations) {
  std::string why;
  const std::string bytes = safetensors_bytes(spec, model, params, iterations, &why);
  if (bytes.empty()) {
    log::warn("{} not written: {}; params.f32 holds the parameters", path, why);
    return;
  }
  write_binary_file(path, bytes.data(), bytes.size());
}

}  // namespace tandem
