#pragma once
// Fills a worker's input batch for an iteration: the sampler's indices for this
// worker's slice of the global batch, gathered from the data set into a device
// tensor and a label array that are reused every step (sized for the largest batch
// seen, so a changing local batch allocates nothing once warmed up).
//
// How a batch reaches the device (held there and gathered by index, or staged
// through host memory) is DeviceInput's choice, by data.on_device.
//
// On a GPU the next iteration's batch can be prefetched: its gather (or its host
// gather and upload on the copy engine) is queued behind this iteration's optimizer
// step. load() then finds it ready, as long as the plan did not change the slice.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.hpp"
#include "engine/data/dataset.hpp"
#include "engine/data/batch_positions.hpp"
#include "engine/data/sampler.hpp"
#include "engine/train/device_input.hpp"

namespace tandem {

class BatchLoader {
public:
  // on_device: data.on_device ('auto', 'always' or 'never'; device_input.hpp).
  BatchLoader(const Dataset& data, const GlobalSampler& sampler, Device& dev, const std::string& on_device = "auto");
  // Iterations' global batches placed by `positions` (the trainer's: B may change)
  // rather than by the sampler's fixed B.
  void use_positions(const BatchPositions& positions) { positions_ = &positions; }
  // Positions [offset, offset + count) of iteration t's global batch.
  const Tensor& load(int64_t iteration, int64_t offset, int64_t count);
  // Starts loading a later load()'s batch now (once: the same slice asked again is
  // already on its way). Only a device that computes asynchronously gains from it; on
  // the CPU it does nothing.
  void prefetch(int64_t iteration, int64_t offset, int64_t count);
  // The loaded batch's labels, in device memory: count * the data set's
  // targets_per_sample(), sample by sample (a language model's: one per position).
  const int32_t* labels() const { return DeviceInput::labels_of(labels_[current_]); }
  const DeviceInput& input() const { return input_; }
  const std::vector<int64_t>& indices() const { return indices_; }

private:
  struct Slice {
    int64_t iteration = -1, start = 0, offset = 0, count = 0;
    bool operator==(const Slice& o) const {
      return iteration == o.iteration && start == o.start && offset == o.offset && count == o.count;
    }
  };
  int64_t start_of(int64_t iteration) const;
  void fill(int slot, const Slice& s);

  const GlobalSampler& sampler_;
  const BatchPositions* positions_ = nullptr;
  Device& dev_;
  DeviceInput input_;
  // Two slots: the batch in use and the one being prefetched.
  Tensor x_[2];
  Tensor labels_[2];
  Slice slice_[2];
  int current_ = 0;
  std::vector<int64_t> indices_;
};

}  // namespace tandem
