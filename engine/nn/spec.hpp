#pragma once
// A model as data: what a Lua model file (models/*.lua) builds and the engine turns
// into layers. Input sizes of each layer are inferred from the previous one's
// output, so a spec only says what a user would write in a paper's table.
#include <map>
#include <string>
#include <vector>

#include "engine/core/tensor.hpp"

namespace tandem {

struct LayerSpec {
  // linear | relu | conv2d | maxpool2d | batchnorm | avgpool | residual | flatten | dropout
  // | embedding | transformer_block | layernorm | lm_head
  std::string type;
  // Numeric arguments by name: linear{out, in?, bias}, conv2d{out_channels, kernel,
  // stride, padding, in_channels?, bias}, maxpool2d{kernel, stride}, dropout{p};
  // a GPT's: embedding{n_embd, seq_len, vocab? (the classes), dropout?},
  // transformer_block{n_head, dropout?, n_layer? (scales the init)}, layernorm{eps?},
  // lm_head{tied? (1: shares the nearest earlier embedding's weight), vocab? (untied)}.
  // Booleans are stored as 0/1.
  std::map<std::string, double> args;
  // Where the layer was written (file:line), so a bad argument points at the source.
  std::string where;
  // residual only: y = relu(body(x) + shortcut(x)); an empty shortcut is the identity.
  std::vector<LayerSpec> body = {}, shortcut = {};
};

struct ModelSpec {
  std::string name;
  Shape input;  // one sample, e.g. {1, 28, 28}
  int classes = 0;
  std::vector<LayerSpec> layers;
};

// Whether any layer (residual bodies and shortcuts included) is batch norm, whose
// statistics depend on how a batch is cut (micro-batches, accumulate).
inline bool has_batchnorm(const std::vector<LayerSpec>& layers) {
  for (const LayerSpec& l : layers)
    if (l.type == "batchnorm" || has_batchnorm(l.body) || has_batchnorm(l.shortcut)) return true;
  return false;
}
inline bool model_has_layer_state(const ModelSpec& spec) { return has_batchnorm(spec.layers); }

}  // namespace tandem
