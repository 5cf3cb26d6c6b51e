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

FeistelPermutation::FeistelPermutation(int64_t n, uint64_t key) : n_(n) {
  TANDEM_CHECK(n >= 1 && n <= (int64_t{1} << 62), "a permutation of ", n, " elements (1 to 2^62)");
  int bits = 2;  // an even number of bits, 2^bits >= n: each half holds bits / 2
  while (bits < 62 && (int64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  for (int r = 0; r < 4; ++r) keys_[r] = mix_seed(key, 0x5eed0000u + static_cast<uint64_t>(r));
}

uint64_t FeistelPermutation::round(uint64_t half, int r) const {
  uint64_t z = half ^ keys_[r];  // splitmix64's finaliser: every input bit moves every output bit
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & half_mask_;
}

int64_t FeistelPermutation::operator()(int64_t i) const {
  TANDEM_CHECK(i >= 0 && i < n_, "permutation index ", i, " outside [0, ", n_, ")");
  // Four rounds permute [0, 4^half_bits); values past n walk on until they land
  // inside (n is over a quarter of the domain: under 4 steps on average).
  uint64_t x = static_cast<uint64_t>(i);
  do {
    uint64_t left = x >> half_bits_, right = x & half_mask_;
    for (int r = 0; r < 4; ++r) {
      const uint64_t next = left ^ round(right, r);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

void GlobalSampler::slice_at(int64_t start, int64_t offset, int64_t count, std::vector<int64_t>& out) const {
  TANDEM_CHECK(start >= 0 && offset >= 0 && count >= 0, "slice [", offset, ", ", offset + count,
               ") of the global batch at stream position ", start);
  const int64_t first = start % size_ + offset;
  TANDEM_CHECK(first + count <= size_, "slice [", offset, ", ", offset + count, ") of the global batch at stream ",
               "position ", start, " runs past the end of its epoch (", size_, " samples)");
  if (size_ > kMaterializedPermutation) {
    const FeistelPermutation perm(size_, mix_seed(seed_, static_cast<uint64_t>(start / size_)));
    out.resize(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) out[static_cast<size_t>(j)] = perm(first + j);
    return;
  }
  const auto& perm = permutation(start / size_);
  out.assign(perm.begin() + first, perm.begin() + first + count);
}

}  // namespace tandem
