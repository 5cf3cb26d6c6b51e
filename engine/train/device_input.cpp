#include "engine/train/device_input.hpp"

namespace tandem {

DeviceInput::~DeviceInput() {
  for (int i = 0; i < 2; ++i)
    if (staging_[i]) dev_.deallocate_host(staging_[i], staging_bytes_[i]);
}

void* DeviceInput::staging(size_t bytes) {
  turn_ ^= 1;
  if (bytes > staging_bytes_[turn_]) {
    if (staging_[turn_]) dev_.deallocate_host(staging_[turn_], staging_bytes_[turn_]);  // waits for its upload
    staging_[turn_] = dev_.allocate_host(bytes);
    staging_bytes_[turn_] = bytes;
  }
  return staging_[turn_];
}

void DeviceInput::fill(const Dataset& data, const int64_t* indices, int64_t count, Tensor& x,
                       std::vector<int32_t>& labels) {
  Shape shape{count};
  shape.insert(shape.end(), data.sample_shape().begin(), data.sample_shape().end());
  x.ensure(dev_, shape);
  labels.resize(static_cast<size_t>(count * data.targets_per_sample()));
  const size_t values = static_cast<size_t>(x.numel());
  if (dev_.kind() == DeviceKind::cpu) {
    data.gather(indices, count, x.data(), labels.data());
  } else if (const Dataset::ByteForm* form = data.byte_form()) {
    auto* bytes = static_cast<uint8_t*>(staging(values));
    data.gather_bytes(indices, count, bytes, labels.data());
    dev_.upload_normalized(x.data(), bytes, values, form->scale, form->shift);
  } else {
    auto* floats = static_cast<float*>(staging(values * sizeof(float)));
    data.gather(indices, count, floats, labels.data());
    dev_.upload(x.data(), floats, values);
  }
}

}  // namespace tandem
