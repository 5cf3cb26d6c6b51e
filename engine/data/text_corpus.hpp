#pragma once
// Byte-level text for a language model: the files data.files names, concatenated,
// are one stream of tokens, each a byte (a vocabulary of 256: no tokenizer, no
// download). The default corpus is Debian's `fortunes` package, about 2.6 MB of
// English. The last data.validation fraction of the stream is held out as one
// contiguous tail, so that no training window sees held-out text. Training sample i
// is the window tokens[i, i + seq_len) with targets tokens[i + 1, i + seq_len + 1):
// every start position is a sample, as in nanoGPT's random offsets, but drawn by the
// global sampler without repeats in an epoch. Validation samples tile the tail
// without overlap (stride seq_len), so one evaluation reads the held-out text once.
// A sample's floats are its token ids (0..255); the embedding looks them up.
//
// The training and validation sets of one run read the same files: they share one
// copy of the bytes (make_dataset is called once for each).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/data_config.hpp"
#include "engine/data/dataset.hpp"

namespace tandem {

constexpr int kTextVocabulary = 256;
// The longest window: far past what a model of this engine trains on, and small
// enough that a window's floats (and its labels) never overflow an int.
constexpr int kTextMaxSeqLen = 65536;
// The validation fraction's bounds (exclusive, inclusive): a held-out tail of at
// most half the text.
constexpr double kTextMaxValidation = 0.5;
// The corpus must give at least this many disjoint training windows.
constexpr int64_t kTextMinTrainWindows = 4;

// The files `paths` (data.files) names, in reading order: a file as given; a
// folder's regular files sorted by name, without subfolders, hidden files, `.dat`
// files (fortune's binary index), `.u8` files and symbolic links (fortune's `.u8`
// links name the file beside them, and a copy that followed links holds them as
// files: the text would be read twice). Throws naming data.files when a path is
// missing or a folder holds no text file; reads nothing.
std::vector<std::string> text_corpus_files(const std::vector<std::string>& paths);

// Where the token stream splits. [0, train_tokens) trains; validation windows start
// at train_tokens, one every seq_len tokens.
struct TextSplit {
  int64_t tokens = 0;
  int64_t train_tokens = 0;
  int64_t train_windows = 0;       // train_tokens - seq_len
  int64_t validation_windows = 0;  // (tokens - train_tokens - 1) / seq_len: the last one's targets fit
};
// Throws naming data.seq_len, data.validation and data.files (`source` says which
// files) when the values are out of range or the text is too short for them.
TextSplit text_split(int64_t tokens, int seq_len, double validation, const std::string& source);

// The training set (train) or the validation set of cfg's text.
std::unique_ptr<Dataset> make_text_dataset(const DataConfig& cfg, bool train);

// The baseline a language model must beat: the cross-entropy, in nats per byte, of
// predicting every target of `eval` by the byte frequencies of `train` (add-one
// smoothed, so a byte the training text lacks costs a finite amount).
double unigram_cross_entropy(const uint8_t* train, int64_t train_count, const uint8_t* eval, int64_t eval_count);
// The same for cfg's text: the training part's frequencies, scored on the targets of
// the validation windows (what evaluation scores).
double unigram_cross_entropy(const DataConfig& cfg);

}  // namespace tandem
