#pragma once
// A simulated run's samples, counted by the global batch each iteration drew (a
// policy may change B within policy.global_batch): their mean B, the ideal
// throughput at the same batches, and goodput (Pollux's: throughput times
// statistical efficiency). Goodput counts each sample at its iteration's
// efficiency E(B) (gradient_model.hpp), so it is the samples at B0 that would make
// the same progress, per second: sum_t B_t E(B_t) / time, which is samples/s times
// the samples' mean E. With B = B0 throughout, E = 1 and goodput is samples/s.
#include <cstdint>

namespace tandem {

struct BatchTally {
  int64_t iterations = 0;
  int64_t samples = 0;
  double progress = 0.0;  // sum_t B_t E(B_t): samples at B0's worth
  double ideal_s = 0.0;   // the same samples at the ideal throughput of each B
  bool changed = false;   // some iteration's B was not B0

  // `count` iterations of global batch `batch` at statistical efficiency
  // `efficiency`, whose ideal throughput is `ideal_samples_per_s` (> 0).
  void add(int64_t count, int64_t batch, int64_t base_batch, double efficiency, double ideal_samples_per_s) {
    const double s = static_cast<double>(count * batch);
    iterations += count;
    samples += count * batch;
    progress += s * efficiency;
    ideal_s += s / ideal_samples_per_s;
    if (batch != base_batch) changed = true;
  }
  double mean_batch() const {
    return iterations ? static_cast<double>(samples) / static_cast<double>(iterations) : 0.0;
  }
  // The samples' mean statistical efficiency.
  double efficiency() const { return samples ? progress / static_cast<double>(samples) : 1.0; }
  double ideal_samples_per_s() const { return ideal_s > 0 ? static_cast<double>(samples) / ideal_s : 0.0; }
  double goodput(double train_s) const { return train_s > 0 ? progress / train_s : 0.0; }
};

}  // namespace tandem
