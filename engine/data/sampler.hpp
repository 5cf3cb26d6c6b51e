#pragma once
// The global sampler. Every epoch is a seeded permutation of the training set;
// iteration t takes the next B indices of its epoch's permutation. Every rank
// computes the same global batch and takes its own slice, so which samples a step
// sees never depends on how the batch is split: balancing changes speed, never the
// mathematics. The last partial batch of an epoch is dropped, so every step has
// exactly B samples and the global batch stays what the experiment says.
//
// A data set of up to kMaterializedPermutation samples gets a Fisher-Yates shuffle
// held in memory (8 bytes a sample). A larger one (a token file's every window: 8.5
// billion for OpenWebText) gets a permutation computed index by index, a keyed
// Feistel network over the next power of four with cycle walking: a bijection of
// [0, N), O(1) memory, the same on every rank, a new one every epoch.
#include <cstdint>
#include <vector>

namespace tandem {

// Up to 2^24 samples (128 MB of indices) the permutation is materialised.
constexpr int64_t kMaterializedPermutation = int64_t{1} << 24;

// The computed permutation of [0, n) for one epoch (keyed by seed and epoch).
class FeistelPermutation {
public:
  FeistelPermutation(int64_t n, uint64_t key);
  int64_t operator()(int64_t i) const;

private:
  uint64_t round(uint64_t half, int r) const;
  int64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t keys_[4];
};

class GlobalSampler {
public:
  GlobalSampler(int64_t dataset_size, int64_t global_batch, uint64_t seed);
  int64_t iterations_per_epoch() const { return per_epoch_; }
  int64_t epoch_of(int64_t iteration) const { return iteration / per_epoch_; }
  // The B indices of iteration t (t counts from 0 across epochs).
  void global_batch(int64_t iteration, std::vector<int64_t>& out) const;
  // Positions [offset, offset + count) of iteration t's global batch: one rank's part.
  void slice(int64_t iteration, int64_t offset, int64_t count, std::vector<int64_t>& out) const;
  // The same for a global batch starting at stream position `start` (epoch start /
  // N, its (start mod N)-th permuted index; engine/data/batch_positions.hpp), of any
  // size that stays within the epoch.
  void slice_at(int64_t start, int64_t offset, int64_t count, std::vector<int64_t>& out) const;
  // Where iteration t's global batch starts in that stream, with this sampler's B.
  int64_t start_of(int64_t iteration) const { return epoch_of(iteration) * size_ + (iteration % per_epoch_) * batch_; }
  int64_t dataset_size() const { return size_; }

private:
  const std::vector<int64_t>& permutation(int64_t epoch) const;
  int64_t size_, batch_, per_epoch_;
  uint64_t seed_;
  // The current epoch's permutation, computed when the epoch changes: O(B) per step.
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> perm_;
};

}  // namespace tandem
