#include "engine/train/batch_loader.hpp"

namespace tandem {

BatchLoader::BatchLoader(const Dataset& data, const GlobalSampler& sampler, Device& dev,
                         const std::string& on_device)
    : sampler_(sampler), dev_(dev), input_(dev, data, on_device) {}

int64_t BatchLoader::start_of(int64_t iteration) const {
  return positions_ ? positions_->at(iteration).start : sampler_.start_of(iteration);
}

void BatchLoader::fill(int slot, const Slice& s) {
  sampler_.slice_at(s.start, s.offset, s.count, indices_);
  input_.fill(indices_.data(), s.count, x_[slot], labels_[slot], s.start / sampler_.dataset_size());
  slice_[slot] = s;
}

const Tensor& BatchLoader::load(int64_t iteration, int64_t offset, int64_t count) {
  const Slice want{iteration, start_of(iteration), offset, count};
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
  const Slice want{iteration, start_of(iteration), offset, count};
  if (slice_[current_ ^ 1] == want) return;  // queued already
  fill(current_ ^ 1, want);
}

}  // namespace tandem
