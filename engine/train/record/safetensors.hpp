#pragma once
// The final parameters as a safetensors file (<run dir>/params.safetensors, written with
// save_params = true beside params.f32), named so that PyTorch's equivalent model loads
// them with load_state_dict. The format (huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets:
// [begin, end)}, "__metadata__": {...}} padded with spaces to a multiple of 8, then
// the raw little-endian data, offsets relative to its start.
//
// The equivalent model is an nn.Sequential with one module per layer of the model
// file, in order (models/*.lua: flatten -> nn.Flatten, relu -> nn.ReLU, dropout ->
// nn.Dropout, maxpool2d -> nn.MaxPool2d, linear -> nn.Linear, conv2d -> nn.Conv2d,
// batchnorm -> nn.BatchNorm1d/2d), so a layer's tensors are named by its index in
// that list, as the Sequential's state_dict names them:
//   linear     <i>.weight [out, in], <i>.bias [out]    (tandem's layout is torch's: no transpose)
//   conv2d     <i>.weight [out_channels, in_channels, k, k], <i>.bias [out_channels]
//   batchnorm  <i>.weight, <i>.bias, <i>.running_mean, <i>.running_var [channels] (F32),
//              <i>.num_batches_tracked [] (I64: the iterations trained)
// A ReLU that tandem folds into the layer before it keeps its own index.
// A GPT (models/gpt.lua: embedding, transformer_block..., layernorm, lm_head) is named
// as nanoGPT's state_dict: transformer.wte.weight [vocab, C], transformer.wpe.weight
// [seq_len, C], transformer.h.<b>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
// mlp.c_proj}.{weight, bias}, transformer.ln_f.{weight, bias}; a tied lm_head is wte
// and is not written again (safetensors refuses shared tensors: give lm_head.weight
// wte's tensor before load_state_dict), an untied one is lm_head.weight [vocab, C].
// A residual block i (engine/nn/residual.hpp) is relu(body(x) + shortcut(x)): its
// layers are named <i>.body.<j>. and <i>.shortcut.<j>. as above (j their place in the
// block's body or shortcut list), as a module with `body` and `shortcut` Sequentials.
// A layer kind with no naming here gets no file, and the log says why (params.f32 is
// written all the same).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/nn/model.hpp"
#include "engine/nn/spec.hpp"

namespace tandem {

// The safetensors bytes of `params` (the model's flat buffer, on the host), or "" with
// `why` set where a layer kind has no PyTorch naming here.
std::string safetensors_bytes(const ModelSpec& spec, const Model& model, const std::vector<float>& params,
                              int64_t iterations, std::string* why);
// The tensors safetensors_bytes would write, in its order, without their data: each
// one's name, dtype, shape and where it starts in the flat parameter buffer (-1 for
// a layer's state: batch norm's running statistics and step count), or {} with `why`
// set. init_from (engine/train/checkpoint/init_from.hpp) reads files by these.
struct SafetensorsEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  int64_t flat_offset = -1;
};
std::vector<SafetensorsEntry> safetensors_entries(const ModelSpec& spec, const Model& model,
                                                  const std::vector<float>& params, std::string* why);
// Writes `path` when the model can be named; otherwise logs a warning saying why.
void export_safetensors(const std::string& path, const ModelSpec& spec, const Model& model,
                        const std::vector<float>& params, int64_t iterations);

}  // namespace tandem
