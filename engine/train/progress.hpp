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
