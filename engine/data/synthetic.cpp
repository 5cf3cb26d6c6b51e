#include "engine/data/synthetic.hpp"

#include <algorithm>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"

namespace tandem {

namespace {

class Synthetic final : public Dataset {
public:
  Synthetic(Shape shape, int classes, int64_t size, uint64_t seed, int split)
      : shape_(std::move(shape)), classes_(classes), size_(size),
        sample_seed_(mix_seed(seed, 0x73706c6974ULL + static_cast<uint64_t>(split))), numel_(shape_numel(shape_)) {
    TANDEM_CHECK_HINT(classes >= 2, "set data.classes to 2 or more", "synthetic data needs at least 2 classes");
    TANDEM_CHECK_HINT(size >= 1, "set data.train_size / data.test_size", "synthetic data set of size ", size);
    const bool positive = !shape_.empty() && std::all_of(shape_.begin(), shape_.end(), [](int64_t d) { return d > 0; });
    TANDEM_CHECK_HINT(positive, "set data.shape to positive sizes, e.g. {1, 28, 28}", "synthetic sample shape ",
                      shape_str(shape_));
    Rng rng(mix_seed(seed, 0x70726f746fULL));
    prototypes_.resize(static_cast<size_t>(classes) * static_cast<size_t>(numel_));
    for (auto& v : prototypes_) v = rng.normal();
  }

  std::string name() const override { return "synthetic" + shape_str(shape_); }
  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return classes_; }

  void gather(const int64_t* indices, int64_t count, float* x, int32_t* labels) const override {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t s = indices[i];
      TANDEM_CHECK(s >= 0 && s < size_, "sample index ", s, " outside synthetic data set of size ", size_);
      Rng rng(mix_seed(sample_seed_, static_cast<uint64_t>(s)));
      const int label = static_cast<int>(rng.below(static_cast<uint64_t>(classes_)));
      const float* proto = prototypes_.data() + static_cast<size_t>(label) * static_cast<size_t>(numel_);
      float* dst = x + static_cast<size_t>(i) * static_cast<size_t>(numel_);
      // Noise as large as the signal: learnable, but not in one step.
      for (int64_t p = 0; p < numel_; ++p) dst[p] = proto[p] + rng.uniform(-1.5f, 1.5f);
      labels[i] = label;
    }
  }

private:
  Shape shape_;
  int classes_;
  int64_t size_;
  uint64_t sample_seed_;
  int64_t numel_;
  std::vector<float> prototypes_;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic(Shape sample_shape, int classes, int64_t size, uint64_t seed, int split) {
  return std::make_unique<Synthetic>(std::move(sample_shape), classes, size, seed, split);
}

}  // namespace tandem
