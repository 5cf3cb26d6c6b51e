#include "engine/train/batch_loader.hpp"

namespace tandem {

BatchLoader::BatchLoader(const Dataset& data, const GlobalSampler& sampler, Device& dev)
    : data_(data), sampler_(sampler), dev_(dev), input_(dev) {}

void BatchLoader::fill(int slot, const Slice& s) {
  sampler_.slice(s.iteration, s.offset, s.count, indices_);
  input_.fill(data_, indices_.data(), s.count, x_[slot], labels_[slot]);
  slice_[slot] = s;
}

const Tensor& BatchLoader::load(int64_t iteration, int64_t offset, int64_t count) {
  const Slice want{iteration, offset, count};
  const int other = current_ ^ 1;
  if (slice_[other] == want) {
    current_ = other;  // prefetched
  } else {
    fill(current_, want);
  }
  slice_[current_ ^ 1] = Slice{};  // a prefetch not taken is stale
  return x_[current_];
}

void BatchLoader::prefetch(int64_t iteration, int64_t offset, int64_t count) {
  if (dev_.kind() == DeviceKind::cpu) return;
  fill(current_ ^ 1, Slice{iteration, offset, count});
}

}  // namespace tandem
