#include "engine/data/fashion_mnist.hpp"

#include <array>
#include <cstring>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/data/idx_reader.hpp"

namespace tandem {

namespace {

const char* kPackage = "dataset-fashion-mnist";

std::string idx_path(const std::string& dir, bool train, bool images) {
  return dir + (train ? "/train" : "/t10k") + (images ? "-images-idx3-ubyte.gz" : "-labels-idx1-ubyte.gz");
}

class FashionMnist final : public Dataset {
public:
  FashionMnist(const std::string& dir, bool train) : name_(train ? "fashion-mnist/train" : "fashion-mnist/test") {
    const std::string prefix = dir + (train ? "/train" : "/t10k");
    IdxArray images = read_idx_gz(idx_path(dir, train, true), 3, kPackage);
    IdxArray labels = read_idx_gz(idx_path(dir, train, false), 1, kPackage);
    if (images.dims[1] != 28 || images.dims[2] != 28)
      TANDEM_FAIL_HINT("point data.dir at the Fashion-MNIST files", "images in ", prefix,
                       "-images-idx3-ubyte.gz are ", images.dims[1], "x", images.dims[2], ", not 28x28");
    if (images.dims[0] != labels.dims[0])
      TANDEM_FAIL_HINT("reinstall " + std::string(kPackage), prefix, "-images-idx3-ubyte.gz holds ", images.dims[0],
                       " images but ", prefix, "-labels-idx1-ubyte.gz holds ", labels.dims[0], " labels");
    for (size_t i = 0; i < labels.bytes.size; ++i)
      if (labels.bytes.data[i] >= 10)
        TANDEM_FAIL_HINT("reinstall " + std::string(kPackage), "label ", int(labels.bytes.data[i]), " of sample ", i,
                         " in ", prefix, "-labels-idx1-ubyte.gz is not a class 0..9");
    pixels_ = std::move(images.bytes);
    labels_ = std::move(labels.bytes);
    for (int v = 0; v < 256; ++v) table_[v] = (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
    rows_.samples = pixels_.data;
    rows_.sample_bytes = rows_.sample_stride = 28 * 28;
    rows_.labels = labels_.data;
    rows_.label_bytes = rows_.label_stride = 1;
    rows_.table = table_.data();
    rows_.rows = size();
  }
  // rows_ points into this object's own members: a copy would point into the original.
  FashionMnist(const FashionMnist&) = delete;
  FashionMnist& operator=(const FashionMnist&) = delete;

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size); }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return 10; }

  void gather(const int64_t* indices, int64_t count, float* x, int32_t* labels) const override {
    constexpr size_t kPixels = 28 * 28;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t s = indices[i];
      TANDEM_CHECK(s >= 0 && s < size(), "sample index ", s, " outside ", name_, " of size ", size());
      const uint8_t* src = pixels_.data + static_cast<size_t>(s) * kPixels;
      float* dst = x + static_cast<size_t>(i) * kPixels;
      for (size_t p = 0; p < kPixels; ++p) dst[p] = table_[src[p]];
      labels[i] = labels_.data[static_cast<size_t>(s)];
    }
  }

  const ByteForm* byte_form() const override { return &bytes_; }
  void gather_bytes(const int64_t* indices, int64_t count, uint8_t* x, int32_t* labels) const override {
    constexpr size_t kPixels = 28 * 28;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t s = indices[i];
      TANDEM_CHECK(s >= 0 && s < size(), "sample index ", s, " outside ", name_, " of size ", size());
      std::memcpy(x + static_cast<size_t>(i) * kPixels, pixels_.data + static_cast<size_t>(s) * kPixels, kPixels);
      labels[i] = labels_.data[static_cast<size_t>(s)];
    }
  }

  const ByteRows* byte_rows() const override { return &rows_; }

private:
  std::string name_;
  // (byte / 255 - mean) / std, as the table below computes it on the host.
  ByteForm bytes_{1.0f / (255.0f * kFashionMnistStd), -kFashionMnistMean / kFashionMnistStd};
  Shape shape_{1, 28, 28};
  SharedBytes pixels_, labels_;  // the inflated files (mapped from the cache where it has them)
  std::array<float, 256> table_;  // normalised value of each byte: a lookup, not arithmetic, per pixel
  ByteRows rows_;
};

}  // namespace

std::unique_ptr<Dataset> load_fashion_mnist(const std::string& dir, bool train) {
  return std::make_unique<FashionMnist>(dir, train);
}

int64_t fashion_mnist_size(const std::string& dir, bool train) {
  return static_cast<int64_t>(read_idx_gz(idx_path(dir, train, false), 1, kPackage).dims[0]);
}

std::vector<std::string> fashion_mnist_files(const std::string& dir) {
  return {idx_path(dir, true, true), idx_path(dir, true, false), idx_path(dir, false, true),
          idx_path(dir, false, false)};
}

}  // namespace tandem
