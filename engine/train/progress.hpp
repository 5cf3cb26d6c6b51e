#pragma once
// The run's counters every part of the loop adds to, and the emulated timeline.
//
// The timeline: an emulated worker's step starts at the anchor, where every rank
// left the last collective (Comm::last_sync_end_ms), so that ranks sharing cores,
// which get to their real work in turn, still arrive when their emulated devices
// would. What is not training (evaluations, pauses, checkpoints, a meeting of the
// relaxed modes) restarts the timeline at its end. Only this class moves the anchor
// between iterations; a relaxed segment carries its own copy from step to step until
// its meeting.
#include <cstdint>

#include "engine/core/clock.hpp"

namespace tandem {

struct Progress {
  double train_ms = 0.0;      // training time so far (evaluations and pauses excluded)
  int64_t samples = 0;        // samples trained on
  int64_t version = 0;        // weight updates applied (every rank holds the same)
  int64_t skipped_steps = 0;  // steps skipped for a NaN or Inf
  // Samples the iterations done drew (the sum of their global batches, skipped steps
  // included): epochs and learning-rate schedules count these when B may change.
  int64_t samples_drawn = 0;
  int64_t sample_cursor = 0;  // where the next global batch is drawn from (BatchPositions), for checkpoints
  double noise_scale = 0.0;  // the gradient noise scale in force (lr_scaling = 'adascale'; 0: not known)
  double lr = 0.0;           // the learning rate of iteration lr_iteration's update (bsp)
  int64_t lr_iteration = -1;
  // Epochs done: samples drawn over an epoch's samples at the experiment's B0
  // (per_epoch global batches of B0); with B fixed, iterations over per_epoch.
  double epochs(int64_t per_epoch, int64_t base_batch) const {
    return static_cast<double>(samples_drawn) / static_cast<double>(per_epoch * base_batch);
  }
};

class Timeline {
public:
  // Every rank calls it right after the start-up collective: the clock origin.
  void start() { origin_ = anchor_ = now_ms(); }
  // Times in the trace are relative to the origin.
  double origin() const { return origin_; }
  // Where the next emulated step starts.
  double anchor() const { return anchor_; }
  // The last collective ended at end_ms for every rank.
  void synced(double end_ms) { anchor_ = end_ms; }
  // Something that is not training just ended.
  void restart() { anchor_ = now_ms(); }

private:
  double origin_ = 0.0, anchor_ = 0.0;
};

}  // namespace tandem
