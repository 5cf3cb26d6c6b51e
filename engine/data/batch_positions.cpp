#include "engine/data/batch_positions.hpp"

#include <algorithm>

#include "engine/core/error.hpp"

namespace tandem {

namespace {
constexpr size_t kRunsKept = 16;
}

BatchPositions::BatchPositions(int64_t dataset_size, int64_t size, int64_t first, int64_t cursor,
                               int64_t samples_before)
    : n_(dataset_size) {
  TANDEM_CHECK_HINT(n_ >= 1, "use a data set with samples", "a data set of ", n_, " samples");
  TANDEM_CHECK_HINT(size >= 1 && size <= n_, "keep the global batch within [1, the data set's size]",
                    "a global batch of ", size, " from a data set of ", n_, " samples");
  TANDEM_CHECK(first >= 0 && cursor >= 0 && samples_before >= 0, "batch positions from iteration ", first,
               ", stream position ", cursor, ", ", samples_before, " samples done");
  runs_.push_back({first, skip_tail(cursor, size), size, samples_before, cursor});
}

int64_t BatchPositions::skip_tail(int64_t cursor, int64_t size) const {
  const int64_t left = n_ - cursor % n_;
  return left < size ? cursor + left : cursor;
}

void BatchPositions::resize(int64_t t, int64_t size) {
  TANDEM_CHECK(t >= runs_.front().iteration, "batch positions: iteration ", t, " is before the first kept (",
               runs_.front().iteration, ")");
  TANDEM_CHECK_HINT(size >= 1 && size <= n_, "keep policy.global_batch within [1, the data set's size]",
                    "a global batch of ", size, " at iteration ", t, " from a data set of ", n_, " samples");
  if (at(t).size == size) return;
  while (runs_.size() > 1 && runs_.back().iteration >= t) runs_.pop_back();
  if (runs_.back().iteration >= t) {  // the first kept run itself changes size
    BatchSpan& first = runs_.back();
    first.size = size;
    first.start = skip_tail(first.cursor, size);
    return;
  }
  const BatchSpan before = at(t - 1);
  const int64_t cursor = before.start + before.size;
  runs_.push_back({t, skip_tail(cursor, size), size, before.samples_before + before.size, cursor});
  if (runs_.size() > kRunsKept) runs_.erase(runs_.begin());
}

BatchSpan BatchPositions::at(int64_t t) const {
  auto run = std::upper_bound(runs_.begin(), runs_.end(), t,
                              [](int64_t it, const BatchSpan& r) { return it < r.iteration; });
  TANDEM_CHECK(run != runs_.begin(), "batch positions: iteration ", t, " is before the first kept (",
               runs_.front().iteration, ")");
  const BatchSpan& r = *std::prev(run);
  const int64_t steps = t - r.iteration, b = r.size;
  BatchSpan s = r;
  s.iteration = t;
  s.samples_before = r.samples_before + steps * b;
  // Within the run's first epoch, then whole epochs of n_ / b batches.
  const int64_t epoch = r.start / n_, in_epoch = r.start % n_;
  const int64_t first_left = (n_ - in_epoch) / b;
  if (steps < first_left) {
    s.start = r.start + steps * b;
  } else {
    const int64_t later = steps - first_left, per_epoch = n_ / b;
    s.start = (epoch + 1 + later / per_epoch) * n_ + (later % per_epoch) * b;
  }
  s.cursor = steps == 0 ? r.cursor : s.start;
  return s;
}

int64_t BatchPositions::cursor_after(int64_t t) const {
  const BatchSpan s = at(t);
  return s.start + s.size;
}

}  // namespace tandem
