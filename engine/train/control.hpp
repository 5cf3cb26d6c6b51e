#pragma once
// What every rank learns at an iteration boundary: rank 0's decisions (stop, pause,
// a checkpoint, the policy's next plan, a console slowdown) and each rank's word on
// whether its own step was finite. A typed message with named fields; how it travels
// is the transport's business (ControlWire below), not the training loop's.
//
// It rides with the gradient all-reduce in bsp, so it costs no collective of its
// own: the all-reduce SUMs floats, so every field is written as a float by the rank
// that owns it and as 0 by every other rank, and the sum is the owner's value. Every
// number a field holds is an integer far below 2^24 (exact in a float) or a speed
// factor carried at float precision; encode() checks the integers. The relaxed sync
// modes broadcast the same encoding at their meetings.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/train/plan.hpp"

namespace tandem {

// A console emulate{}: `worker` at `speed` from the next iteration for `iterations`
// (0: to the end).
struct SlowdownRequest {
  int worker = 0;
  double speed = 1.0;
  int64_t iterations = 0;
};

struct Control {
  bool stop = false;        // end the run after this boundary
  bool pause = false;       // the console paused the run: wait for its word
  bool checkpoint = false;  // rank 0 writes a checkpoint at this boundary
  std::optional<Plan> plan;  // the policy's next plan (validated by every rank)
  std::optional<SlowdownRequest> slowdown;
  // Rank 0's gradient noise scale (train/noise_scale.hpp), for lr_scaling =
  // 'adascale': every rank's learning-rate gain follows it from the next iteration.
  // Travels at float precision; every rank reads the same float.
  std::optional<double> noise_scale;
  // By rank: that rank's loss or gradient was not finite this step (bsp only); every
  // rank then sees the same flags and skips the same step.
  std::vector<bool> nonfinite;

  bool any_nonfinite() const;
  // "1, 3": the ranks whose step was not finite, for messages.
  std::string nonfinite_ranks() const;
};

// Control as the floats that ride in a SUM all-reduce (or a broadcast) of `world`
// ranks. The layout is private to this codec.
class ControlWire {
public:
  explicit ControlWire(int world) : world_(world) {}
  size_t floats() const;
  // Writes this rank's part of `c` into out[0 .. floats()): rank 0 its decisions,
  // every rank its own nonfinite flag, zeros elsewhere.
  void encode(const Control& c, int rank, float* out) const;
  // The summed message (every rank reads the same).
  Control decode(const float* in) const;

private:
  int world_;
};

}  // namespace tandem
