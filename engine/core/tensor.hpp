#pragma once
// A float32 tensor on a Device. Storage is shared so views (a layer's weights inside
// the model's one flat parameter buffer, a reshape for Flatten) cost nothing.
// Buffers that change size every step (activations under a varying local batch) grow
// by capacity and are reused, so no allocation happens in a steady-state step.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/device.hpp"

namespace tandem {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);

class Storage {
public:
  Storage(Device& dev, size_t count);
  Storage(Device& dev, float* borrowed, size_t count);  // non-owning view
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  float* data() const { return data_; }
  size_t count() const { return count_; }
  Device& device() const { return dev_; }

private:
  Device& dev_;
  float* data_;
  size_t count_;
  bool owned_;
};

class Tensor {
public:
  Tensor() = default;
  Tensor(Device& dev, Shape shape);  // allocates, zero-filled
  static Tensor view_of(Device& dev, float* data, Shape shape);

  bool defined() const { return storage_ != nullptr; }
  float* data() const { return storage_ ? storage_->data() + offset_ : nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return shape_numel(shape_); }
  Device& device() const;

  // Same storage, new shape with the same element count.
  Tensor reshape(Shape shape) const;
  // Makes this tensor hold `shape`, reusing storage when it is large enough.
  void ensure(Device& dev, Shape shape);
  // Host copies, for tests, checkpoints and the boundary with data loading.
  std::vector<float> to_host() const;
  void from_host(const float* src, size_t count);
  void fill(float value);

private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
};

}  // namespace tandem
