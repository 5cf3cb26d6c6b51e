#include "engine/data/sampler.hpp"

#include <numeric>

#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"

namespace tandem {

GlobalSampler::GlobalSampler(int64_t dataset_size, int64_t global_batch, uint64_t seed)
    : size_(dataset_size), batch_(global_batch), seed_(seed) {
  TANDEM_CHECK_HINT(global_batch >= 1, "set global_batch to 1 or more", "global batch of ", global_batch);
  TANDEM_CHECK_HINT(global_batch <= dataset_size, "lower global_batch", "global batch ", global_batch,
                    " is larger than the data set (", dataset_size, " samples)");
  per_epoch_ = size_ / batch_;
}

const std::vector<int64_t>& GlobalSampler::permutation(int64_t epoch) const {
  if (epoch != cached_epoch_) {
    perm_.resize(static_cast<size_t>(size_));
    std::iota(perm_.begin(), perm_.end(), int64_t{0});
    Rng rng(mix_seed(seed_, static_cast<uint64_t>(epoch)));
    for (int64_t i = size_ - 1; i > 0; --i)  // Fisher-Yates
      std::swap(perm_[static_cast<size_t>(i)], perm_[rng.below(static_cast<uint64_t>(i + 1))]);
    cached_epoch_ = epoch;
  }
  return perm_;
}

void GlobalSampler::global_batch(int64_t iteration, std::vector<int64_t>& out) const {
  slice(iteration, 0, batch_, out);
}

void GlobalSampler::slice(int64_t iteration, int64_t offset, int64_t count, std::vector<int64_t>& out) const {
  TANDEM_CHECK(iteration >= 0, "negative iteration ", iteration);
  TANDEM_CHECK(offset >= 0 && count >= 0 && offset + count <= batch_, "slice [", offset, ", ", offset + count,
               ") is outside the global batch of ", batch_);
  slice_at(start_of(iteration), offset, count, out);
}

void GlobalSampler::slice_at(int64_t start, int64_t offset, int64_t count, std::vector<int64_t>& out) const {
  TANDEM_CHECK(start >= 0 && offset >= 0 && count >= 0, "slice [", offset, ", ", offset + count,
               ") of the global batch at stream position ", start);
  const int64_t first = start % size_ + offset;
  TANDEM_CHECK(first + count <= size_, "slice [", offset, ", ", offset + count, ") of the global batch at stream ",
               "position ", start, " runs past the end of its epoch (", size_, " samples)");
  const auto& perm = permutation(start / size_);
  out.assign(perm.begin() + first, perm.begin() + first + count);
}

}  // namespace tandem
