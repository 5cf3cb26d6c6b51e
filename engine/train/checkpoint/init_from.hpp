#pragma once
// init_from = 'FILE.safetensors': the model's starting weights from a file, for
// fine-tuning. Two layouts are read:
//   - tandem's own params.safetensors (engine/train/record/safetensors.hpp: nanoGPT's
//     names for a GPT, an nn.Sequential's for the rest), batch norm's running
//     statistics included;
//   - Hugging Face's GPT-2 (model.safetensors of GPT2Model or GPT2LMHeadModel):
//     wte.weight, wpe.weight, h.<b>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
//     mlp.c_proj}.{weight, bias}, ln_f.{weight, bias}, with or without the
//     "transformer." prefix; its Conv1D weights are [in, out] and are transposed into
//     tandem's [out, in]. The attention's mask buffers (attn.bias, attn.masked_bias)
//     are not weights and are passed over; a tied model's lm_head.weight, where the
//     file has one, must equal wte.
// F32, F16 and BF16 tensors are read. A position embedding longer than the model's
// context is cut to its first seq_len rows (nanoGPT's crop_block_size), and the log
// says so. Every tensor's name and shape is checked: a shape that differs is an
// error naming the tensor, the file's shape and the model's; a tensor the model has
// and the file lacks, or one the file has and the model lacks, is an error naming
// the first, unless init_from_strict = false (then the model keeps its own
// initialisation for what is missing, and the log lists what was left out).
#include <string>

#include "engine/nn/model.hpp"
#include "engine/nn/spec.hpp"

namespace tandem {

// Loads `path` into `model`'s parameters (and layer state); every rank calls it with
// the same file, so every rank starts from the same weights.
void init_from_safetensors(const std::string& path, bool strict, const ModelSpec& spec, Model& model);

}  // namespace tandem
