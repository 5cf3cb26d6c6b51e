#include "engine/core/tensor.hpp"

#include "engine/core/error.hpp"

namespace tandem {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

Storage::Storage(Device& dev, size_t count) : dev_(dev), data_(dev.allocate(count)), count_(count), owned_(true) {
  dev_.fill(data_, count_, 0.0f);
}

Storage::Storage(Device& dev, float* borrowed, size_t count)
    : dev_(dev), data_(borrowed), count_(count), owned_(false) {}

Storage::~Storage() {
  if (owned_) dev_.deallocate(data_, count_);
}

Tensor::Tensor(Device& dev, Shape shape) : shape_(std::move(shape)) {
  for (int64_t d : shape_) TANDEM_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape_));
  storage_ = std::make_shared<Storage>(dev, static_cast<size_t>(std::max<int64_t>(numel(), 1)));
}

Tensor Tensor::view_of(Device& dev, float* data, Shape shape) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.storage_ = std::make_shared<Storage>(dev, data, static_cast<size_t>(t.numel()));
  return t;
}

Device& Tensor::device() const {
  TANDEM_CHECK(storage_ != nullptr, "tensor has no storage");
  return storage_->device();
}

Tensor Tensor::reshape(Shape shape) const {
  TANDEM_CHECK(shape_numel(shape) == numel(), "cannot reshape ", shape_str(shape_), " into ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::ensure(Device& dev, Shape shape) {
  const int64_t need = shape_numel(shape);
  if (!storage_ || &storage_->device() != &dev || storage_->count() - offset_ < static_cast<size_t>(need)) {
    storage_ = std::make_shared<Storage>(dev, static_cast<size_t>(std::max<int64_t>(need, 1)));
    offset_ = 0;
  }
  shape_ = std::move(shape);
}

std::vector<float> Tensor::to_host() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  if (!out.empty()) device().copy_to_host(out.data(), data(), out.size());
  return out;
}

void Tensor::from_host(const float* src, size_t count) {
  TANDEM_CHECK(count == static_cast<size_t>(numel()), "from_host got ", count, " values for a tensor of shape ",
               shape_str(shape_));
  device().copy_from_host(data(), src, count);
}

void Tensor::fill(float value) { device().fill(data(), static_cast<size_t>(numel()), value); }

}  // namespace tandem
