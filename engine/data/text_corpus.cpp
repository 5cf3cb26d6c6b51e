#include "engine/data/text_corpus.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <utility>

#include "engine/core/error.hpp"
#include "engine/data/file_names.hpp"

namespace tandem {

namespace {

namespace fs = std::filesystem;

const char* const kHint = "install the default corpus with `apt-get install fortunes` (data.files = "
                          "{'/usr/share/games/fortunes'}), or point data.files at text files or folders of them";

std::vector<uint8_t> read_all(const std::vector<std::string>& files) {
  std::vector<uint8_t> bytes;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) TANDEM_FAIL_HINT("check the file's permissions, or " + std::string(kHint), "data.files: '", f,
                              "' cannot be read");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    in.seekg(0);
    const size_t at = bytes.size();
    bytes.resize(at + static_cast<size_t>(std::max<std::streamoff>(size, 0)));
    in.read(reinterpret_cast<char*>(bytes.data() + at), size);
    if (!in || in.gcount() != size)
      TANDEM_FAIL_HINT("check the file", "data.files: reading '", f, "' stopped after ", in.gcount(), " of ", size,
                       " bytes");
  }
  return bytes;
}

// One copy of the text per set of files: the training and validation sets made for
// a run share it, as long as one of them is alive.
std::shared_ptr<const std::vector<uint8_t>> shared_text(const std::vector<std::string>& files) {
  static std::mutex mutex;
  static std::vector<std::string> last_files;
  static std::weak_ptr<const std::vector<uint8_t>> last;
  std::lock_guard<std::mutex> lock(mutex);
  if (files == last_files)
    if (auto text = last.lock()) return text;
  auto text = std::make_shared<const std::vector<uint8_t>>(read_all(files));
  last_files = files;
  last = text;
  return text;
}

class TextWindows final : public Dataset {
public:
  // Windows of seq_len tokens starting at first + i * stride, i < count.
  TextWindows(std::shared_ptr<const std::vector<uint8_t>> text, std::string name, int seq_len, int64_t first,
              int64_t stride, int64_t count)
      : text_(std::move(text)), name_(std::move(name)), shape_{seq_len}, first_(first), stride_(stride),
        count_(count) {
    for (int v = 0; v < 256; ++v) identity_[v] = static_cast<float>(v);
    // Window s and its targets (the window shifted by one) as strided rows of the text.
    rows_.samples = text_->data() + first_;
    rows_.sample_bytes = rows_.label_bytes = seq_len;
    rows_.sample_stride = rows_.label_stride = stride_;
    rows_.labels = text_->data() + first_ + 1;
    rows_.table = identity_;
    rows_.rows = count_;
  }
  TextWindows(const TextWindows&) = delete;  // rows_ points into text_ and identity_
  TextWindows& operator=(const TextWindows&) = delete;

  std::string name() const override { return name_; }
  int64_t size() const override { return count_; }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return kTextVocabulary; }
  int64_t targets_per_sample() const override { return shape_[0]; }

  void gather(const int64_t* indices, int64_t count, float* x, int32_t* labels) const override {
    const size_t len = static_cast<size_t>(shape_[0]);
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t* w = window(indices[i]);
      float* dst = x + static_cast<size_t>(i) * len;
      for (size_t t = 0; t < len; ++t) dst[t] = static_cast<float>(w[t]);
      targets(w, labels + static_cast<size_t>(i) * len);
    }
  }

  const ByteForm* byte_form() const override { return &bytes_; }
  void gather_bytes(const int64_t* indices, int64_t count, uint8_t* x, int32_t* labels) const override {
    const size_t len = static_cast<size_t>(shape_[0]);
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t* w = window(indices[i]);
      std::memcpy(x + static_cast<size_t>(i) * len, w, len);
      targets(w, labels + static_cast<size_t>(i) * len);
    }
  }

  const ByteRows* byte_rows() const override { return &rows_; }

private:
  const uint8_t* window(int64_t s) const {
    TANDEM_CHECK(s >= 0 && s < count_, "sample index ", s, " outside ", name_, " of size ", count_);
    return text_->data() + static_cast<size_t>(first_ + s * stride_);
  }
  // The next token at every position: the window shifted by one.
  void targets(const uint8_t* w, int32_t* labels) const {
    for (int64_t t = 0; t < shape_[0]; ++t) labels[t] = w[t + 1];
  }

  std::shared_ptr<const std::vector<uint8_t>> text_;
  std::string name_;
  Shape shape_;
  int64_t first_, stride_, count_;
  ByteForm bytes_{1.0f, 0.0f};  // token ids as they are
  float identity_[256];         // ... and as a table: byte v is the float v
  ByteRows rows_;
};

}  // namespace

std::vector<std::string> text_corpus_files(const std::vector<std::string>& paths) {
  TANDEM_CHECK_HINT(!paths.empty(), kHint, "data.files is empty: the text data set has nothing to read");
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (!fs::exists(st)) TANDEM_FAIL_HINT(kHint, "data.files: '", p, "' does not exist");
    if (!fs::is_directory(st)) {
      files.push_back(p);
      continue;
    }
    std::vector<std::string> inside;
    for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
      const std::string name = e.path().filename().string();
      const std::string ext = e.path().extension().string();
      if (e.is_symlink(ec) || !e.is_regular_file(ec) || name.front() == '.' || ext == ".dat" || ext == ".u8") continue;
      inside.push_back(e.path().string());
    }
    if (ec) TANDEM_FAIL_HINT("check the folder's permissions", "data.files: folder '", p, "' cannot be listed: ",
                             ec.message());
    if (inside.empty())
      TANDEM_FAIL_HINT(kHint, "data.files: folder '", p, "' holds no text file (its subfolders, hidden files, .dat "
                       "and .u8 files and symbolic links are not read)");
    std::sort(inside.begin(), inside.end());
    files.insert(files.end(), inside.begin(), inside.end());
  }
  return files;
}

TextSplit text_split(int64_t tokens, int seq_len, double validation, const std::string& source) {
  TANDEM_CHECK_HINT(seq_len >= 1 && seq_len <= kTextMaxSeqLen,
                    "set data.seq_len from 1 to " + std::to_string(kTextMaxSeqLen) + " (the model's context length)",
                    "data.seq_len = ", seq_len, " is out of range");
  TANDEM_CHECK_HINT(validation > 0 && validation <= kTextMaxValidation,
                    "set data.validation above 0 and at most " + std::to_string(kTextMaxValidation) + " (e.g. 0.1)",
                    "data.validation = ", validation, " is out of range");
  TANDEM_CHECK_HINT(tokens > 0, kHint, "data.files: the text of ", source, " is empty");
  TextSplit s;
  s.tokens = tokens;
  s.train_tokens = tokens - static_cast<int64_t>(std::floor(static_cast<double>(tokens) * validation));
  s.train_windows = s.train_tokens - seq_len;
  s.validation_windows = std::max<int64_t>(0, (tokens - s.train_tokens - 1) / seq_len);
  const int64_t need_train = kTextMinTrainWindows * seq_len + 1;
  // The least text that gives both parts what they need; the held-out tail needs one
  // window and the target after it.
  const int64_t need = static_cast<int64_t>(std::ceil(std::max(static_cast<double>(need_train) / (1.0 - validation),
                                                               static_cast<double>(seq_len + 1) / validation)));
  if (s.train_tokens < need_train || s.validation_windows < 1)
    TANDEM_FAIL_HINT("point data.files at more text (about " + std::to_string(need) +
                         " bytes at least), or lower data.seq_len" +
                         (s.validation_windows < 1 ? " or raise data.validation" : ""),
                     "data.files: the text of ", source, " is ", tokens, " bytes, too short for data.seq_len = ",
                     seq_len, " with data.validation = ", validation, " (", s.train_tokens, " training bytes, ",
                     kTextMinTrainWindows, " windows need ", need_train, "; a ", tokens - s.train_tokens,
                     "-byte validation tail, one window needs ", seq_len + 1, ")");
  return s;
}

std::unique_ptr<Dataset> make_text_dataset(const DataConfig& cfg, bool train) {
  const std::vector<std::string> files = text_corpus_files(cfg.files);
  auto text = shared_text(files);
  const TextSplit s =
      text_split(static_cast<int64_t>(text->size()), cfg.seq_len, cfg.validation, describe_files(files));
  if (train) return std::make_unique<TextWindows>(std::move(text), "text/train", cfg.seq_len, 0, 1, s.train_windows);
  return std::make_unique<TextWindows>(std::move(text), "text/validation", cfg.seq_len, s.train_tokens, cfg.seq_len,
                                       s.validation_windows);
}

double unigram_cross_entropy(const uint8_t* train, int64_t train_count, const uint8_t* eval, int64_t eval_count) {
  TANDEM_CHECK(eval_count > 0, "unigram cross-entropy over no targets");
  std::array<double, kTextVocabulary> count{};
  for (int64_t i = 0; i < train_count; ++i) count[train[i]] += 1.0;
  std::array<double, kTextVocabulary> nll{};
  const double total = static_cast<double>(train_count) + kTextVocabulary;
  for (int b = 0; b < kTextVocabulary; ++b) nll[static_cast<size_t>(b)] = -std::log((count[b] + 1.0) / total);
  double sum = 0.0;
  for (int64_t i = 0; i < eval_count; ++i) sum += nll[eval[i]];
  return sum / static_cast<double>(eval_count);
}

double unigram_cross_entropy(const DataConfig& cfg) {
  const std::vector<std::string> files = text_corpus_files(cfg.files);
  const auto text = shared_text(files);
  const TextSplit s =
      text_split(static_cast<int64_t>(text->size()), cfg.seq_len, cfg.validation, describe_files(files));
  // The validation windows' targets: [train_tokens + 1, train_tokens + windows * seq_len].
  return unigram_cross_entropy(text->data(), s.train_tokens, text->data() + s.train_tokens + 1,
                               s.validation_windows * cfg.seq_len);
}

}  // namespace tandem
