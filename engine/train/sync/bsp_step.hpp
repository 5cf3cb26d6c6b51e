#pragma once
// One bsp iteration of one worker, as data flows (DESIGN.md):
//   this rank's slice of the global batch -> forward + backward (SUM loss)
//   -> emulated stretch -> arrival and gradient all-reduce (SUM), rank 0's
//   decisions riding along -> optimizer step dividing by the global batch.
// While the device (or the emulated one) computes, rank 0 does the boundary's
// bookkeeping off the collectives' path: the policy gets the stats of t-1 and
// decides, and t-1 is recorded (boundary.hpp).
//
// A NaN or Inf on any rank: every rank sees the same flags in the Control and skips
// the update; max_nonfinite_steps in a row end the run. Batch norm's running
// statistics move in the forward pass, so a skipped step puts them back.
//
// One worker may take the fused step instead (fused_step; engine/train/step.hpp):
// compute, check and update queued on the device at once, the skip of a non-finite
// step decided there, and on a GPU the whole step one CUDA graph's replay. The host's
// bookkeeping (the skip's warning and streak, the progress) follows its one read.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/dist/comm.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/model.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/boundary.hpp"
#include "engine/train/config.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/emulation/faults.hpp"
#include "engine/train/nonfinite.hpp"
#include "engine/train/progress.hpp"
#include "engine/train/step.hpp"
#include "engine/train/sync/gradient_sync.hpp"

namespace tandem {

// What a bsp step works with; the trainer owns all of it.
struct BspParts {
  const ExperimentConfig& cfg;
  Comm& comm;
  Model& model;
  TrainStep& step;
  BatchLoader& loader;
  BatchPositions& positions;  // where each iteration's global batch lies (B may change)
  GradientSync& gradients;
  BatchReducer* reducer;  // batch norm's statistics over all ranks (null: one rank)
  const Emulator& emulator;
  const DeviceProfile& machine;  // this machine's calibration, for the emulation
  const LrSchedule& schedule;
  const FaultInjector& faults;
  Progress& progress;
  Timeline& timeline;
  int64_t total;  // iterations of the run
};

class BspStep {
public:
  // plans_known: the next iteration's plan is known at the end of this one (false
  // only for the per-iteration random plan), so its batch can be prefetched.
  BspStep(const BspParts& parts, bool plans_known);
  // Iteration t under `plan`; returns the Control every rank received.
  StepResult run(const Plan& plan, int64_t t, Boundary& boundary);
  // Steps whose real compute outlasted their emulated time (oversubscribed cores).
  int64_t overruns() const { return overruns_; }
  // Whether iterations take the fused step, and why not when they do not ("" when
  // they do): for the log.
  bool fused() const { return fused_; }
  const std::string& fused_obstacle() const { return fused_obstacle_; }
  // A fused step is read one iteration late: whether one is unread, and its reading
  // (its books kept, its stats posted), which the trainer does before a boundary that
  // evaluates, checkpoints, stops or changes the plan, and at the end.
  bool unread() const { return unread_.has_value(); }
  void settle(Boundary& boundary);

private:
  // Forward + backward of this rank's slice into `now`; false when the loss or the
  // gradient is not finite.
  bool compute(const Tensor& x, int64_t t, int64_t offset, WorkerStats& now);
  // Iteration t's global batch under `plan` (checked against the sampler's), kept in
  // batch_ and samples_before_.
  BatchSpan place(const Plan& plan, int64_t t);
  // Iteration t's batch under `plan` placed and its gather started (a GPU's: queued
  // behind what the device runs now; nothing on the CPU).
  void prefetch(int64_t t, const Plan& plan);
  // Sets the step to this rank's micro-batches in `plan` (or accumulate); returns the
  // passes its local batch b takes (the stats' micro_batches).
  int64_t use_micro_batches(const Plan& plan, int64_t b);
  // An iteration with the fused step (above).
  StepResult run_fused(const Plan& plan, int64_t t, Boundary& boundary);
  // settle(); count_wait: the wait for the step's read is counted in its step_ms (a
  // read before a boundary; in run_fused the wait is the reading iteration's).
  void settle_unread(Boundary& boundary, bool count_wait);
  // Sleeps until the emulated device would be done; sets now.compute_ms.
  void emulate(int64_t t, WorkerStats& now);
  // The arrival and the all-reduce, with `out` riding along.
  Control synchronize(const Control& out, WorkerStats& now);
  // The update, or the skip of a step some rank found not finite.
  bool update(const Control& in, int64_t t, Boundary& boundary);
  // After a fused step: the bookkeeping of the update the device took, or of its skip.
  bool settle_fused(const Control& in, int64_t t, double lr);
  // The skip of a non-finite step: its warning, the streak, batch norm put back.
  void skip(const Control& in, int64_t t);
  // This iteration's learning rate (the schedule at the samples drawn, scaled to B),
  // and its note in the progress once the update is taken.
  double learning_rate() const;
  void note_update(double lr, int64_t t);

  BspParts p_;
  int rank_, world_;
  bool plans_known_, has_layer_state_;
  std::vector<double> layer_state_before_;
  double link_delay_ms_ = 0.0;  // the slowest emulated link holds every rank
  // Emulated with gradient buckets: the layers' ready points (Model::gradient_ready_points)
  // that emulate() tells at the emulated device's pace instead of the real pass's.
  std::vector<size_t> emulated_ready_points_;
  std::optional<Stretch> stretch_;  // emulated: this step's device time, from run() to emulate()
  NonfiniteStreak nonfinite_;
  bool warned_clamp_ = false;
  int64_t overruns_ = 0;
  // The iteration's global batch and the samples drawn before it (BatchPositions).
  int64_t batch_ = 0, samples_before_ = 0;
  // Whether the workers' and the summed gradient's norms are measured: for the
  // policy's noise estimate, or rank 0's for lr_scaling = 'adascale'.
  bool measure_noise_ = false;
  bool fused_ = false;
  std::string fused_obstacle_;
  // The fused step queued and not yet read, with what its books need.
  struct Unread {
    int64_t t = 0, batch = 0;
    double start = 0.0, queue_start = 0.0, queue_ms = 0.0, step_ms = 0.0, lr = 0.0;
    WorkerStats now;
  };
  std::optional<Unread> unread_;
};

}  // namespace tandem
