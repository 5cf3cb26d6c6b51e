#pragma once
// A data set the engine trains on: a fixed number of samples, each a float tensor of
// one shape plus targets_per_sample() integer labels (one for a classifier; one per
// position for a language model, which predicts every next token). gather() copies
// the samples a worker needs for one step into a contiguous host buffer (the batch),
// in the order of the indices, and their labels into another, sample by sample.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/tensor.hpp"
#include "kernels/byte_rows.hpp"

namespace tandem {

class Dataset {
public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  virtual int64_t size() const = 0;
  virtual const Shape& sample_shape() const = 0;  // e.g. {1, 28, 28}
  virtual int classes() const = 0;
  // Labels per sample, each a class in [0, classes()).
  virtual int64_t targets_per_sample() const { return 1; }
  // x: count * numel(sample_shape) floats; labels: count * targets_per_sample() ints,
  // sample i's at [i * targets_per_sample(), (i + 1) * targets_per_sample()).
  // indices in [0, size()).
  virtual void gather(const int64_t* indices, int64_t count, float* x, int32_t* labels) const = 0;
  // The same for a batch drawn in `epoch`: a data set that augments its samples
  // (cifar10's random crops and flips) draws each sample's augmentation from its
  // seed, the epoch and the sample's index, so that a sample looks the same however
  // the global batch is split (each sample is drawn once an epoch) and differently
  // from one epoch to the next. The rest ignore the epoch.
  virtual void gather_drawn(const int64_t* indices, int64_t count, int64_t epoch, float* x, int32_t* labels) const {
    (void)epoch;
    gather(indices, count, x, labels);
  }

  // Samples stored as bytes can travel as bytes (a quarter of the traffic to a GPU)
  // and be normalised on the device: value = byte * scale + shift.
  struct ByteForm {
    float scale = 1.0f, shift = 0.0f;
  };
  // The byte form, where the data set has one (then gather_bytes works: x as
  // count * numel(sample_shape) bytes, labels as gather's).
  virtual const ByteForm* byte_form() const { return nullptr; }
  virtual void gather_bytes(const int64_t* indices, int64_t count, uint8_t* x, int32_t* labels) const;

  // A data set stored as rows of bytes, one per sample (Fashion-MNIST's images and
  // labels; a text's overlapping windows and their next tokens), can be held whole
  // in a device's memory and its batches gathered there by index
  // (engine/train/device_input.hpp): no host gather and no upload per step. A
  // sample's values are table[byte], the same lookup gather() makes; its labels
  // are bytes (classes() <= 256). The pointers are the data set's host memory.
  using ByteRows = ByteRowTable;
  // The rows, where the data set is stored so (synthetic samples are computed: not).
  virtual const ByteRows* byte_rows() const { return nullptr; }
};

}  // namespace tandem
