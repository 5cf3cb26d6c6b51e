#include "engine/data/token_files.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/core/error.hpp"
#include "engine/core/mapped_file.hpp"
#include "engine/data/file_names.hpp"

namespace tandem {

namespace {

const char* const kFormatHint =
    "write token files with tools/data/text_to_tokens.py, nanoGPT's prepare.py (np.memmap, uint16) or llm.c's "
    "data scripts, and set data.format = 'auto', 'nanogpt' or 'llmc'";

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string file_what(const std::string& path) { return "token file '" + path + "'"; }
const char* const kNotAFileHint = "point data.train and data.validation at token files";

// The shard's header and size, from its mapped bytes.
TokenShardInfo inspect(const MappedFile& file, const std::string& path, const std::string& format) {
  TANDEM_CHECK_HINT(format == "auto" || format == "nanogpt" || format == "llmc", kFormatHint, "data.format = '",
                    format, "' is not a token file format");
  TokenShardInfo info;
  info.path = path;
  const int64_t bytes = file.size();
  int32_t header[3] = {0, 0, 0};
  // A file that starts with the magic is an llm.c shard, whole or cut short.
  if (bytes > 0) std::memcpy(header, file.data(), static_cast<size_t>(std::min<int64_t>(bytes, sizeof header)));
  const bool magic = bytes >= 4 && static_cast<uint32_t>(header[0]) == kLlmcMagic;
  info.format = format == "auto" ? (magic ? "llmc" : "nanogpt") : format;
  if (info.format == "llmc") {
    TANDEM_CHECK_HINT(bytes >= kLlmcHeaderBytes, kFormatHint, "token file '", path, "' is ", bytes,
                      " bytes, shorter than llm.c's ", kLlmcHeaderBytes, "-byte header (data.format = '", format,
                      "')");
    TANDEM_CHECK_HINT(magic, kFormatHint, "token file '", path, "' starts with ", header[0],
                      " where llm.c's magic number ", kLlmcMagic, " belongs: not an llm.c shard (data.format = '",
                      format, "')");
    TANDEM_CHECK_HINT(static_cast<uint32_t>(header[1]) == kLlmcVersion, kFormatHint, "token file '", path,
                      "' is llm.c format version ", header[1], "; tandem reads version ", kLlmcVersion,
                      " (uint16 tokens)");
    info.header_bytes = kLlmcHeaderBytes;
    info.tokens = header[2];
    const int64_t want = kLlmcHeaderBytes + 2 * info.tokens;
    TANDEM_CHECK_HINT(header[2] >= 0 && bytes == want, "the file is truncated or was written in pieces: write it again",
                      "token file '", path, "': its header counts ", header[2], " tokens (", want,
                      " bytes with the header) but the file is ", bytes, " bytes");
  } else {
    TANDEM_CHECK_HINT(bytes % 2 == 0, "the file is truncated, or not uint16 tokens: write it again (" +
                                          std::string(kFormatHint) + ")",
                      "token file '", path, "' is ", bytes,
                      " bytes, not a whole number of 2-byte tokens (data.format = '", format, "' read it as nanoGPT's "
                      "raw uint16)");
    info.tokens = bytes / 2;
  }
  return info;
}

// A shard mapped read-only (engine/core/mapped_file.hpp): its pages are read when a
// window touches them.
class MappedShard {
public:
  MappedShard(const std::string& path, const std::string& format, bool random_access)
      : file_(path, file_what(path), kNotAFileHint, random_access), info_(inspect(file_, path, format)) {}

  const TokenShardInfo& info() const { return info_; }
  const uint16_t* tokens() const { return reinterpret_cast<const uint16_t*>(file_.data() + info_.header_bytes); }
  // A file cut short after it was mapped would end the process with SIGBUS at the
  // first page past its new end: say so as an error before reading. Best effort: a
  // file cut between this check and the read still ends the process (the check is
  // one stat of the path per window, a few microseconds against a step).
  void check_not_truncated() const {
    struct stat st {};
    if (::stat(info_.path.c_str(), &st) == 0 && static_cast<int64_t>(st.st_size) < file_.size())
      TANDEM_FAIL_HINT("restore the file (training resumes from the run's last checkpoint with --resume)",
                       "token file '", info_.path, "' was cut short while training read it: ",
                       static_cast<int64_t>(st.st_size), " bytes where it had ", file_.size());
  }

private:
  MappedFile file_;  // the whole file: inspect() checked it holds the header and tokens exactly
  TokenShardInfo info_;
};

class TokenWindows final : public Dataset {
public:
  // train: a window at every start; validation: tiling windows, at most cap of them
  // (0: all).
  TokenWindows(const std::vector<std::string>& files, const DataConfig& cfg, bool train, const std::string& key)
      : name_(train ? "tokens/train" : "tokens/validation"), shape_{cfg.seq_len}, seq_len_(cfg.seq_len),
        vocab_(cfg.vocab), stride_(train ? 1 : cfg.seq_len) {
    TANDEM_CHECK_HINT(cfg.vocab >= 2 && cfg.vocab <= kTokenMaxVocab,
                      "set data.vocab to the tokenizer's size (50257 for GPT-2, 256 for byte tokens)",
                      "data.vocab = ", cfg.vocab, " is out of range (2 to ", kTokenMaxVocab, " for uint16 tokens)");
    int64_t windows = 0, tokens = 0;
    for (const std::string& f : files) {
      shards_.push_back(std::make_unique<MappedShard>(f, cfg.format, train));
      const int64_t n = shards_.back()->info().tokens;
      // A window and its targets: seq_len + 1 tokens from its start.
      const int64_t w = n < seq_len_ + 1 ? 0 : train ? n - seq_len_ : (n - 1) / seq_len_;
      first_window_.push_back(windows);
      windows += w;
      tokens += n;
    }
    first_window_.push_back(windows);
    TANDEM_CHECK_HINT(tokens > 0, "point " + key + " at token files that hold tokens", key, ": the ",
                      train ? "training" : "validation", " split (", describe_files(files), ") holds no tokens");
    TANDEM_CHECK_HINT(windows > 0, "lower data.seq_len, or add token files to " + key, key, ": the ",
                      train ? "training" : "validation", " split (", describe_files(files), ") has ", tokens,
                      " tokens, no shard holding a window of data.seq_len = ", seq_len_, " and its targets (",
                      seq_len_ + 1, " tokens)");
    windows_ = windows;
    count_ = !train && cfg.validation_windows > 0 ? std::min(windows, cfg.validation_windows) : windows;
  }

  std::string name() const override { return name_; }
  int64_t size() const override { return count_; }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return vocab_; }
  int64_t targets_per_sample() const override { return seq_len_; }

  void gather(const int64_t* indices, int64_t count, float* x, int32_t* labels) const override {
    const size_t len = static_cast<size_t>(seq_len_);
    for (int64_t i = 0; i < count; ++i) {
      const uint16_t* w = window(indices[i]);
      float* dst = x + static_cast<size_t>(i) * len;
      int32_t* lab = labels + static_cast<size_t>(i) * len;
      for (size_t t = 0; t < len; ++t) {
        dst[t] = static_cast<float>(w[t]);
        lab[t] = w[t + 1];
      }
    }
  }

private:
  // Sample s's window (seq_len + 1 tokens: the inputs and the last target), checked
  // against the vocabulary.
  const uint16_t* window(int64_t s) const {
    TANDEM_CHECK(s >= 0 && s < count_, "sample index ", s, " outside ", name_, " of size ", count_);
    // A capped validation set spreads its windows over the whole split.
    const int64_t g = count_ == windows_ ? s : static_cast<int64_t>((static_cast<__int128>(s) * windows_) / count_);
    const size_t shard = static_cast<size_t>(
        std::upper_bound(first_window_.begin(), first_window_.end(), g) - first_window_.begin() - 1);
    const MappedShard& m = *shards_[shard];
    m.check_not_truncated();
    const int64_t start = (g - first_window_[shard]) * stride_;
    const uint16_t* w = m.tokens() + start;
    for (int64_t t = 0; t <= seq_len_; ++t)
      if (w[t] >= vocab_)
        TANDEM_FAIL_HINT("set data.vocab to the tokenizer's size, or write the file again with that tokenizer",
                         "token file '", m.info().path, "' holds token ", w[t], " at byte offset ",
                         m.info().header_bytes + 2 * (start + t), " (token ", start + t,
                         "), outside data.vocab = ", vocab_);
    return w;
  }

  std::string name_;
  Shape shape_;
  int64_t seq_len_;
  int vocab_;
  int64_t stride_;
  std::vector<std::unique_ptr<MappedShard>> shards_;
  std::vector<int64_t> first_window_;  // shard k's windows are [first_window_[k], first_window_[k + 1])
  int64_t windows_ = 0, count_ = 0;
};

}  // namespace

std::vector<std::string> token_files(const std::vector<std::string>& patterns, const std::string& key) {
  const std::string hint = "list token files or globs, e.g. " + key +
                           " = {'data/train.bin'} or {'fineweb_train_*.bin'} (tools/data/text_to_tokens.py "
                           "writes either format from text files)";
  TANDEM_CHECK_HINT(!patterns.empty(), hint, key, " is empty: the tokens data set needs its files");
  std::vector<std::string> files;
  for (const std::string& p : patterns) {
    if (!has_glob_chars(p)) {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0) TANDEM_FAIL_HINT(hint, key, ": '", p, "' does not exist");
      files.push_back(p);
      continue;
    }
    glob_t g{};
    // No GLOB_ERR: a folder that does not exist is a pattern that matches no file.
    const int rc = ::glob(p.c_str(), 0, nullptr, &g);
    std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
    ::globfree(&g);
    if (rc == GLOB_NOMATCH || (rc == 0 && matched.empty())) TANDEM_FAIL_HINT(hint, key, ": '", p, "' matches no file");
    if (rc != 0) TANDEM_FAIL_HINT("check the folders' permissions", key, ": '", p, "' cannot be expanded (glob error ",
                                  rc, ")");
    files.insert(files.end(), matched.begin(), matched.end());  // glob sorts its matches
  }
  return files;
}

TokenShardInfo inspect_token_shard(const std::string& path, const std::string& format) {
  return inspect(MappedFile(path, file_what(path), kNotAFileHint), path, format);
}

std::unique_ptr<Dataset> make_token_dataset(const DataConfig& cfg, bool train) {
  const std::string key = train ? "data.train" : "data.validation";
  return std::make_unique<TokenWindows>(token_files(train ? cfg.train : cfg.validation_files, key), cfg, train, key);
}

void check_token_files(const DataConfig& cfg) {
  // Mapping costs a few system calls whatever the size: the same checks as training.
  make_token_dataset(cfg, true);
  make_token_dataset(cfg, false);
}

}  // namespace tandem
