#include "engine/train/batch_loader.hpp"

#include "engine/core/error.hpp"

namespace tandem {

BatchLoader::BatchLoader(const Dataset& data, const GlobalSampler& sampler, Device& dev)
    : data_(data), sampler_(sampler), dev_(dev) {
  TANDEM_CHECK(dev.kind() == DeviceKind::cpu, "BatchLoader gathers straight into host memory; a ", dev.name(),
               " device needs a staging copy");
}

const Tensor& BatchLoader::load(int64_t iteration, int64_t offset, int64_t count) {
  sampler_.slice(iteration, offset, count, indices_);
  Shape shape{count};
  shape.insert(shape.end(), data_.sample_shape().begin(), data_.sample_shape().end());
  x_.ensure(dev_, shape);
  labels_.resize(static_cast<size_t>(count));
  data_.gather(indices_.data(), count, x_.data(), labels_.data());
  return x_;
}

}  // namespace tandem
