#pragma once
// Moves a batch of samples from a data set into a device tensor. On the CPU the
// samples are gathered straight into the tensor. On a GPU they are gathered into
// pinned host memory (as bytes where the data set stores bytes: a quarter of the
// traffic, normalised by a kernel on arrival) and uploaded on the device's copy
// engine, so the copy overlaps whatever the device is still computing. Labels stay
// on the host (the loss op takes them from there). A text data set's bytes are token
// ids: they travel as bytes too, with scale 1 and shift 0.
#include <cstdint>
#include <vector>

#include "engine/core/tensor.hpp"
#include "engine/data/dataset.hpp"

namespace tandem {

class DeviceInput {
public:
  explicit DeviceInput(Device& dev) : dev_(dev) {}
  ~DeviceInput();
  DeviceInput(const DeviceInput&) = delete;
  DeviceInput& operator=(const DeviceInput&) = delete;

  // Makes x hold samples indices[0..count) of data ([count, ...sample shape]) and
  // labels their labels: count * data.targets_per_sample(), sample by sample.
  void fill(const Dataset& data, const int64_t* indices, int64_t count, Tensor& x, std::vector<int32_t>& labels);

private:
  // Two staging buffers, used in turn: a fill may start while the upload of the
  // previous one is still in flight (a prefetch the plan then overtook).
  void* staging(size_t bytes);

  Device& dev_;
  void* staging_[2] = {nullptr, nullptr};
  size_t staging_bytes_[2] = {0, 0};
  int turn_ = 0;
};

}  // namespace tandem
