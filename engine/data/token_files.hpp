#pragma once
// Token files for a language model, as nanoGPT and llm.c write them: the data set
// `tokens` (data.train and data.validation: files or globs, data.vocab, data.seq_len,
// data.format).
//
//   nanogpt: raw little-endian uint16 tokens, nothing else (np.memmap's train.bin);
//   llmc:    a header of 256 int32 (magic 20240520, version 1, the token count),
//            then that many uint16 tokens (llm.c's .bin shards);
//   auto:    llmc where a file starts with the magic, nanogpt otherwise.
//
// Files are memory-mapped, never read whole: opening a 17 GB train.bin costs a few
// system calls and no resident memory; the pages a batch touches are read then.
// Each file is a shard: a window never crosses from one file into the next.
// Training sample i is a window of seq_len tokens starting at any position of its
// shard, with the next seq_len tokens as targets (every start is a sample, as
// nanoGPT's random offsets, drawn by the global sampler without repeats in an
// epoch). Validation samples tile each validation shard without overlap; past
// data.validation_windows of them, that many spread evenly over the split.
// A sample's floats are its token ids (exact in a float up to 2^24); the embedding
// looks them up. Every token a gather reads is checked against data.vocab, and one
// outside it is an error naming the file, the byte offset and the token.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/data_config.hpp"
#include "engine/data/dataset.hpp"

namespace tandem {

constexpr uint32_t kLlmcMagic = 20240520;
constexpr uint32_t kLlmcVersion = 1;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;
// uint16 tokens: no vocabulary larger than this fits.
constexpr int kTokenMaxVocab = 65536;

// One shard as opened: where its tokens start in the file, how many, which format.
struct TokenShardInfo {
  std::string path;
  std::string format;       // nanogpt | llmc
  int64_t header_bytes = 0;  // 0 or kLlmcHeaderBytes
  int64_t tokens = 0;
};

// The files `patterns` names, in order: a path as given (it must exist), a glob
// (*, ?, [) its matches sorted by name (it must match a file). `key` names the
// experiment key in errors (data.train, data.validation).
std::vector<std::string> token_files(const std::vector<std::string>& patterns, const std::string& key);

// Reads a shard's header (format: auto, nanogpt or llmc) and checks its size: a
// wrong magic or version, a count that disagrees with the file's size, an odd number
// of bytes, a file too short for its header: each an error naming the file.
TokenShardInfo inspect_token_shard(const std::string& path, const std::string& format);

// The training set (train) or the validation set of cfg's token files; throws before
// anything trains when a split is empty or too short for data.seq_len.
std::unique_ptr<Dataset> make_token_dataset(const DataConfig& cfg, bool train);

// Checks both splits (files there and readable, headers, sizes, a window of
// data.seq_len in each) for the launcher, before any rank starts.
void check_token_files(const DataConfig& cfg);

}  // namespace tandem
