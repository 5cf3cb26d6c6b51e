#pragma once
// `tandem sample EXPERIMENT.lua init_from=FILE [key=value ...] [options]`: text from a
// language model (models/gpt.lua), as nanoGPT's sample.py: the experiment's model
// with the weights of init_from (a run's params.safetensors, or Hugging Face's GPT-2
// model.safetensors), a prompt, and N tokens drawn one at a time (temperature,
// top-k, a seed; temperature 0 takes the arg-max). --logits FILE writes the logits
// of every prompt position, [prompt tokens, vocab] float32 as a .npy file (the
// padded columns left out): what a PyTorch model from the same file is compared
// against.
//
// The model's context is data.seq_len. Each token is one forward pass of a whole
// window: the prompt and what has been drawn so far, its last seq_len tokens at
// the window's start and filler after them; attention is causal, so the filler
// changes nothing before it, and the next token's logits are read at the last real
// position. No key-value cache: a token costs a full window's forward pass (on the
// CPU, about a second for GPT-2 124M at 1,024 tokens on one core).
//
// A prompt of text (--prompt) is its bytes: a byte vocabulary's (256, the text data
// set's) tokens. Larger vocabularies (GPT-2's BPE) take --prompt-tokens, the ids as
// tiktoken or Hugging Face's tokenizer writes them, and print ids.
#include <string>
#include <vector>

#include "engine/cli/options.hpp"

namespace tandem::cli {

// Runs the sampler; returns the exit status. Errors (no language model, a prompt
// beyond the vocabulary, no weights) throw tandem::Error.
int sample(const CommandLine& line);

// The tokens of a --prompt-tokens list ("15496,11,995"), each checked to be in
// [0, vocab); an error names the first that is not a number or not in range.
std::vector<int> parse_prompt_tokens(const std::string& list, int vocab);

}  // namespace tandem::cli
