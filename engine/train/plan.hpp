#pragma once
// The Plan of one iteration: each rank's local batch b_r, with sum b_r = B (the
// global batch), and where each rank's slice starts in the sampler's global batch.
// Ranks with b_r = 0 still join every collective (with a zero gradient), so they
// stay in step instead of hanging the others.
#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

struct Plan {
  std::vector<int64_t> local_batch;  // one per rank

  int64_t global_batch() const;
  int64_t offset(int rank) const;  // first position of rank's slice
  // Throws a tandem::Error naming what is wrong (sizes, negatives, the sum).
  void validate(int world_size, int64_t global_batch) const;
  std::string str() const;  // "[1, 3, 40, 84]"

  // B split as evenly as possible; the first B mod N ranks take one more.
  static Plan equal(int world_size, int64_t global_batch);
  // b_r proportional to weights[r], rounded by largest remainder so the sum is B.
  static Plan proportional(const std::vector<double>& weights, int64_t global_batch);
  // A different uneven split every iteration, zeros included, from the seed: a test
  // of the engine (any plan must give the same training), not a balancing policy.
  static Plan random(int world_size, int64_t global_batch, uint64_t seed);
};

}  // namespace tandem
