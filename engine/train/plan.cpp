#include "engine/train/plan.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"

namespace tandem {

int64_t Plan::global_batch() const { return std::accumulate(local_batch.begin(), local_batch.end(), int64_t{0}); }

int64_t Plan::offset(int rank) const {
  return std::accumulate(local_batch.begin(), local_batch.begin() + rank, int64_t{0});
}

void Plan::validate(int world_size, int64_t global_batch_size) const {
  TANDEM_CHECK_HINT(static_cast<int>(local_batch.size()) == world_size,
                    "give one local batch per worker (plan.batches)", "plan ", str(), " has ", local_batch.size(),
                    " local batches for ", world_size, " workers");
  for (size_t r = 0; r < local_batch.size(); ++r)
    TANDEM_CHECK_HINT(local_batch[r] >= 0, "local batches must be 0 or more", "plan ", str(), " gives rank ", r,
                      " a negative batch");
  TANDEM_CHECK_HINT(global_batch() == global_batch_size, "make the local batches add up to global_batch", "plan ",
                    str(), " sums to ", global_batch(), ", not the global batch ", global_batch_size);
}

std::string Plan::str() const {
  std::string s = "[";
  for (size_t i = 0; i < local_batch.size(); ++i) s += (i ? ", " : "") + std::to_string(local_batch[i]);
  return s + "]";
}

Plan Plan::equal(int world_size, int64_t global_batch_size) {
  Plan p;
  for (int r = 0; r < world_size; ++r)
    p.local_batch.push_back(global_batch_size / world_size + (r < global_batch_size % world_size ? 1 : 0));
  return p;
}

Plan Plan::proportional(const std::vector<double>& weights, int64_t global_batch_size) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  TANDEM_CHECK(total > 0.0 && std::isfinite(total), "proportional plan needs positive weights");
  Plan p;
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t r = 0; r < weights.size(); ++r) {
    const double exact = static_cast<double>(global_batch_size) * weights[r] / total;
    p.local_batch.push_back(static_cast<int64_t>(std::floor(exact)));
    given += p.local_batch.back();
    remainders.emplace_back(exact - std::floor(exact), r);
  }
  // Largest remainder first; ties go to the lower rank, so every rank computes the same plan.
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < global_batch_size; ++i, ++given) ++p.local_batch[remainders[i % remainders.size()].second];
  return p;
}

}  // namespace tandem

namespace tandem {

Plan Plan::random(int world_size, int64_t global_batch_size, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> weights(static_cast<size_t>(world_size));
  for (auto& w : weights) w = rng.uniform() < 0.25f ? 0.0 : static_cast<double>(rng.uniform()) + 1e-3;
  if (std::accumulate(weights.begin(), weights.end(), 0.0) == 0.0) weights[rng.below(weights.size())] = 1.0;
  return proportional(weights, global_batch_size);
}

}  // namespace tandem
