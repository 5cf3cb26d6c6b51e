#include "engine/data/cifar10.hpp"

#include <sys/stat.h>

#include <fstream>

#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"

namespace tandem {

namespace {

std::string hint(const std::string& dir) {
  return "download cifar-10-binary.tar.gz (the CIFAR-10 binary version, from "
         "https://www.cs.toronto.edu/~kriz/cifar.html), unpack it, and point data.dir at its "
         "cifar-10-batches-bin folder (data.dir = '" + dir + "' now)";
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : -1;
}

class Cifar10 final : public Dataset {
public:
  Cifar10(std::vector<uint8_t> records, bool augment, uint64_t seed, std::string name)
      : records_(std::move(records)), count_(static_cast<int64_t>(records_.size()) / kCifarRecordBytes),
        augment_(augment), seed_(seed), name_(std::move(name)) {
    for (int c = 0; c < kCifarChannels; ++c)
      for (int v = 0; v < 256; ++v)
        table_[c][v] = (static_cast<float>(v) / 255.0f - kCifarMean[c]) / kCifarStd[c];
  }

  std::string name() const override { return name_; }
  int64_t size() const override { return count_; }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return kCifarClasses; }

  void gather(const int64_t* indices, int64_t count, float* x, int32_t* labels) const override {
    for (int64_t i = 0; i < count; ++i) copy(indices[i], CifarDraw{}, x + i * kCifarImageBytes, labels + i);
  }
  void gather_drawn(const int64_t* indices, int64_t count, int64_t epoch, float* x, int32_t* labels) const override {
    for (int64_t i = 0; i < count; ++i)
      copy(indices[i], augment_ ? cifar10_draw(seed_, epoch, indices[i]) : CifarDraw{}, x + i * kCifarImageBytes,
           labels + i);
  }

private:
  // Sample s, cropped at (dx, dy) from its 4-pixel padded image and flipped as
  // drawn; CifarDraw{} is the image itself.
  void copy(int64_t s, const CifarDraw& d, float* x, int32_t* label) const {
    TANDEM_CHECK(s >= 0 && s < count_, "sample index ", s, " outside ", name_, " of size ", count_);
    const uint8_t* r = records_.data() + s * kCifarRecordBytes;
    *label = r[0];
    const uint8_t* image = r + 1;
    for (int c = 0; c < kCifarChannels; ++c) {
      const float* table = table_[c];
      const float black = table[0];
      const uint8_t* plane = image + c * kCifarSide * kCifarSide;
      float* out = x + c * kCifarSide * kCifarSide;
      for (int y = 0; y < kCifarSide; ++y) {
        const int sy = y + d.dy - kCifarPad;  // the source row in the unpadded image
        for (int col = 0; col < kCifarSide; ++col) {
          const int ox = d.flip ? kCifarSide - 1 - col : col;
          const int sx = ox + d.dx - kCifarPad;
          const bool inside = sy >= 0 && sy < kCifarSide && sx >= 0 && sx < kCifarSide;
          out[y * kCifarSide + col] = inside ? table[plane[sy * kCifarSide + sx]] : black;
        }
      }
    }
  }

  std::vector<uint8_t> records_;
  int64_t count_;
  bool augment_;
  uint64_t seed_;
  std::string name_;
  Shape shape_{kCifarChannels, kCifarSide, kCifarSide};
  float table_[kCifarChannels][256];
};

}  // namespace

std::vector<std::string> cifar10_files(const std::string& dir, bool train) {
  if (!train) return {dir + "/test_batch.bin"};
  std::vector<std::string> files;
  for (int k = 1; k <= 5; ++k) files.push_back(dir + "/data_batch_" + std::to_string(k) + ".bin");
  return files;
}

void check_cifar10_files(const std::string& dir) {
  for (bool train : {true, false})
    for (const std::string& f : cifar10_files(dir, train)) {
      const int64_t bytes = file_size(f);
      if (bytes < 0) TANDEM_FAIL_HINT(hint(dir), "cifar10: '", f, "' does not exist or is not a file");
      if (!std::ifstream(f, std::ios::binary)) TANDEM_FAIL_HINT(hint(dir), "cifar10: '", f, "' cannot be read");
      TANDEM_CHECK_HINT(bytes > 0 && bytes % kCifarRecordBytes == 0, hint(dir), "cifar10: '", f, "' is ", bytes,
                        " bytes, not a whole number of ", kCifarRecordBytes,
                        "-byte records (a label and a 32x32x3 image): truncated, or not the binary version");
    }
}

int64_t cifar10_size(const std::string& dir, bool train) {
  check_cifar10_files(dir);
  int64_t records = 0;
  for (const std::string& f : cifar10_files(dir, train)) records += file_size(f) / kCifarRecordBytes;
  return records;
}

std::unique_ptr<Dataset> load_cifar10(const DataConfig& cfg, bool train) {
  check_cifar10_files(cfg.dir);
  std::vector<uint8_t> records;
  for (const std::string& f : cifar10_files(cfg.dir, train)) {
    std::ifstream in(f, std::ios::binary);
    const int64_t bytes = file_size(f);
    const size_t at = records.size();
    records.resize(at + static_cast<size_t>(bytes));
    in.read(reinterpret_cast<char*>(records.data() + at), bytes);
    TANDEM_CHECK_HINT(in.gcount() == bytes, hint(cfg.dir), "cifar10: reading '", f, "' stopped after ", in.gcount(),
                      " of ", bytes, " bytes");
    for (size_t r = at; r < records.size(); r += kCifarRecordBytes)
      TANDEM_CHECK_HINT(records[r] < kCifarClasses, hint(cfg.dir), "cifar10: '", f, "' record ",
                        (r - at) / kCifarRecordBytes, " has label ", int{records[r]},
                        " (labels are 0 to 9): not the CIFAR-10 binary version (CIFAR-100's has two label bytes)");
  }
  return std::make_unique<Cifar10>(std::move(records), train && cfg.augment, cfg.seed,
                                   train ? "cifar10/train" : "cifar10/test");
}

CifarDraw cifar10_draw(uint64_t seed, int64_t epoch, int64_t index) {
  Rng rng(mix_seed(mix_seed(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index)));
  CifarDraw d;
  d.dx = static_cast<int>(rng.below(2 * kCifarPad + 1));
  d.dy = static_cast<int>(rng.below(2 * kCifarPad + 1));
  d.flip = rng.below(2) == 1;
  return d;
}

}  // namespace tandem
