#pragma once
// Where each iteration's global batch lies in the sampler's stream of samples, now
// that a plan may change the global batch B (policy.global_batch = {min, max}).
//
// The stream is the epochs' permutations end to end: sample position s is the
// (s mod N)-th index of epoch s div N's permutation (N: the data set's size). An
// iteration takes the next B positions; when fewer than B are left in an epoch, the
// rest of it is skipped (as the fixed-B sampler drops the last partial batch), so no
// global batch repeats a sample. With B fixed from iteration 0, iteration t starts
// where GlobalSampler's fixed mapping puts it: runs that never change B train
// bit for bit as before. Epochs and learning-rate schedules count samples
// (samples_before), not iterations.
#include <cstdint>
#include <vector>

namespace tandem {

struct BatchSpan {
  int64_t iteration = 0;
  int64_t start = 0;           // first stream position of the iteration's global batch
  int64_t size = 0;            // its global batch B
  int64_t samples_before = 0;  // samples trained on before it (sum of earlier B)
  int64_t cursor = 0;          // the stream position before the epoch-tail skip
};

class BatchPositions {
public:
  // From iteration `first` (0, or where a resumed run goes on), global batches of
  // `size` from stream position `cursor`, with `samples_before` samples done.
  BatchPositions(int64_t dataset_size, int64_t size, int64_t first = 0, int64_t cursor = 0,
                 int64_t samples_before = 0);
  // From iteration t on, global batches of `size` (the plan in force from t). Does
  // nothing when t's batch already has that size; throws for t before the first
  // iteration or a size outside [1, N].
  void resize(int64_t t, int64_t size);
  // Iteration t's global batch (t at or after the first iteration).
  BatchSpan at(int64_t t) const;
  // Where the iteration after t starts, before any skip: what a checkpoint keeps.
  int64_t cursor_after(int64_t t) const;
  int64_t dataset_size() const { return n_; }

private:
  int64_t skip_tail(int64_t cursor, int64_t size) const;
  int64_t n_;
  // Runs of equal batches, each from its first iteration; the recent ones are kept
  // (loads and prefetches ask about the last few iterations only).
  std::vector<BatchSpan> runs_;
};

}  // namespace tandem
