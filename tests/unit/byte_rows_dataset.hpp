#pragma once
// A small data set stored as rows of bytes (Dataset::ByteRows), for the tests of the
// device-side gather (unit and GPU): its bytes, labels and table are functions of
// the sample index, any sample size and any labels per sample, and a label may be
// made bad on purpose. gather() is the reference every other way must equal.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/data/dataset.hpp"

namespace tandem::testing {

class ByteRowsDataset final : public Dataset {
public:
  ByteRowsDataset(int64_t size, Shape sample_shape, int64_t targets, int classes)  // classes < 256
      : size_(size), shape_(std::move(sample_shape)), targets_(targets), classes_(classes) {
    const int64_t values = shape_numel(shape_);
    samples_.resize(static_cast<size_t>(size_ * values));
    for (size_t i = 0; i < samples_.size(); ++i) samples_[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    labels_.resize(static_cast<size_t>(size_ * targets_));
    for (size_t i = 0; i < labels_.size(); ++i) labels_[i] = static_cast<uint8_t>((i * 7 + i / 3) % classes_);
    for (int v = 0; v < 256; ++v) table_[v] = (static_cast<float>(v) / 255.0f - 0.3f) / 0.37f;
    rows_.samples = samples_.data();
    rows_.sample_bytes = rows_.sample_stride = values;
    rows_.labels = labels_.data();
    rows_.label_bytes = rows_.label_stride = targets_;
    rows_.table = table_;
    rows_.rows = size_;
  }
  // Makes label `at` (of all size * targets) out of range: a data error.
  void spoil_label(size_t at) { labels_.at(at) = static_cast<uint8_t>(classes_); }

  std::string name() const override { return "byte-rows"; }
  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  int classes() const override { return classes_; }
  int64_t targets_per_sample() const override { return targets_; }
  void gather(const int64_t* indices, int64_t count, float* x, int32_t* labels) const override {
    const int64_t values = shape_numel(shape_);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t s = indices[i];
      TANDEM_CHECK(s >= 0 && s < size_, "index ", s, " outside ", size_);
      for (int64_t j = 0; j < values; ++j) x[i * values + j] = table_[samples_[static_cast<size_t>(s * values + j)]];
      for (int64_t k = 0; k < targets_; ++k) labels[i * targets_ + k] = labels_[static_cast<size_t>(s * targets_ + k)];
    }
  }
  const ByteRows* byte_rows() const override { return &rows_; }

private:
  int64_t size_;
  Shape shape_;
  int64_t targets_;
  int classes_;
  std::vector<uint8_t> samples_, labels_;
  float table_[256];
  ByteRows rows_;  // points into this object: not copyable
public:
  ByteRowsDataset(const ByteRowsDataset&) = delete;
  ByteRowsDataset& operator=(const ByteRowsDataset&) = delete;
};

}  // namespace tandem::testing
