#pragma once
// What happens between two iterations (or two relaxed-sync segments), once for both
// sync paths: every rank's stats go to rank 0, which records them, hands them to the
// policy and decides (stop, pause, a checkpoint, the next plan, a console slowdown);
// the decisions reach every rank as one Control message; every rank then applies
// them: the next plan, the console's requests, an evaluation when one is due, a
// checkpoint when one was decided, the stop.
//
// In bsp the Control rides with the gradient all-reduce (sync/gradient_sync.hpp), so
// rank 0 decides while its device computes: the policy gets the stats of t-1 as
// soon as they are all in (stats_in), its decision is collected after the compute
// (decide), and it applies from t+1; the stats of t leave for rank 0 at the end of t
// (post). A relaxed segment ends at a meeting of all workers: the stats are
// gathered there and rank 0 decides and broadcasts at once (meet).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/data/dataset.hpp"
#include "engine/dist/comm.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/model.hpp"
#include "engine/train/checkpoint/run_checkpoints.hpp"
#include "engine/train/config.hpp"
#include "engine/train/console_link.hpp"
#include "engine/train/control.hpp"
#include "engine/train/device_input.hpp"
#include "engine/train/emulation/faults.hpp"
#include "engine/train/evaluate.hpp"
#include "engine/train/plan_policy.hpp"
#include "engine/train/noise_scale.hpp"
#include "engine/train/progress.hpp"
#include "engine/train/record/run_recorder.hpp"
#include "engine/train/run_length.hpp"
#include "engine/train/sync/relaxed_segment.hpp"

namespace tandem {

// What one step of the loop did: a bsp iteration (its Control came with the
// gradients) or a relaxed segment (its meeting decides the Control).
struct StepResult {
  int64_t done = 0;                      // iterations done after it
  Control control;                       // bsp
  std::optional<SegmentResult> segment;  // relaxed
};

// What the boundary works with; the trainer owns all of it.
struct BoundaryParts {
  const ExperimentConfig& cfg;
  Comm& comm;
  Model& model;
  const Dataset& test_set;
  const LrSchedule& schedule;
  Checkpointer& checkpoints;
  const FaultInjector& faults;
  Emulator& emulator;
  PlanPolicy* policy;     // rank 0's, when the experiment has one
  RunRecorder* recorder;  // rank 0
  Console* console;       // rank 0's, when asked for
  Progress& progress;
  Timeline& timeline;
  RunSummary& summary;
  const Stopwatch& wall;  // since the run started
  int64_t per_epoch, total;
};

class Boundary {
public:
  // host, device: where this rank runs, for every report. pending: the stats a
  // resumed run records and decides on first (empty: none); cluster: what the
  // policy gets beside them.
  Boundary(const BoundaryParts& parts, const std::string& host, const std::string& device,
           const std::string& pending, const ClusterStats& cluster);

  // Rank 0, before iteration t: the console's commands since the last boundary.
  void open(int64_t t, const Plan& plan);
  // This rank's stats for iteration t of local batch b, started at start_ms.
  WorkerStats begin_stats(int64_t t, int64_t local_batch, double start_ms) const;

  // bsp, while iteration t computes: the stats of t-1 completed if all are in (no
  // wait), and rank 0 hands them to the policy. Time spent goes to *stats_ms.
  void stats_in(int64_t t, double* stats_ms);
  // bsp, after iteration t's compute: the stats of t-1 completed (waiting now if
  // they were not in), rank 0's decisions taken and t-1 recorded; returns the
  // control this rank sends with the gradients.
  Control decide(int64_t t, double* stats_ms);
  // bsp, rank 0: the all-reduced gradient's |G / B|^2, for the policy's next look.
  void global_gradient(double grad_sq);
  // This rank's stats of the iteration it just finished leave for rank 0.
  void post(const WorkerStats& mine);
  double post_ms() const { return post_ms_; }
  // Iterations between test evaluations (a relaxed segment ends at the next one).
  int64_t eval_every() const { return eval_every_; }
  // A resumed run's noise-scale estimate (lr_scaling = 'adascale'), from its checkpoint.
  void restore_noise_scale(const std::vector<double>& state) { noise_.restore(state); }

  // Relaxed: the last bsp iteration's stats are recorded before a segment starts.
  void before_segment(int64_t t);
  // The step's Control: bsp's came with the gradients; a segment's meeting gathers
  // the stats, rank 0 records and decides, and every rank gets the decision.
  Control exchange(StepResult& r, const Plan& plan);
  // Every rank, after r.done iterations: the decisions applied (the plan swapped).
  // Returns true when the run stops here.
  bool apply(Control& c, int64_t done, Plan& plan);
  // A test evaluation after `done` iterations (every rank); true when the target is
  // reached.
  bool evaluate(int64_t done);
  // Whether apply(c, done) will do nothing but hand back control: no plan, stop,
  // pause, checkpoint, slowdown, evaluation or last iteration. A fused step may stay
  // unread across such a boundary (sync/bsp_step.hpp). Keep it in step with apply():
  // whatever apply() learns to act on must make a boundary not quiet.
  bool quiet(const Control& c, int64_t done) const;
  // After the loop: the last stats recorded, a final checkpoint, the summary.
  RunSummary finish(int64_t done, const Plan& plan);

private:
  bool rank0() const { return p_.comm.rank() == 0; }
  // Who this rank is and where it runs, on stats of iteration t.
  void stamp(WorkerStats& w, int64_t t) const;
  // The stats of t-1 completed; rank 0 hands them to the policy.
  void finish_and_submit(int64_t t, double* stats_ms);
  double wall_s() const { return p_.wall.elapsed_ms() / 1000.0; }
  // Rank 0's decisions common to both paths: stop, console, checkpoint.
  void decide_common(Control& c, int64_t done);
  void record(int64_t iteration, const SyncRecord* sync = nullptr);
  SyncRecord segment_record(const SegmentResult& seg, const Plan& plan) const;
  void policy_on_segment(const SegmentResult& seg, const Plan& plan, int64_t done, Control& c);
  // The last iteration's stats recorded (before the final evaluation, or at the end).
  void record_last(int64_t done);
  void checkpoint_if_decided(int64_t done, const Plan& in_force, const Control& c);
  void write_checkpoint(int64_t done, const Plan& in_force);
  std::string stop_reason() const;

  BoundaryParts p_;
  int64_t eval_every_;
  std::string host_, device_;
  ConsoleLink console_;
  std::vector<WorkerStats> reports_;  // rank 0: every rank's stats of the last iteration
  WorkerStats mine_;                  // this rank's, untouched until its send completes
  double post_ms_ = 0.0;
  bool reports_in_ = false;           // the stats of t-1 were all in before t's compute
  bool submitted_ = false;            // the policy was asked about t-1
  PolicyReport decision_;             // its decision on t-1, sent in t
  ClusterStats cluster_;              // what the policy gets beside the last bsp stats
  const RunLength length_;            // stop.epochs in batches of B0 and in samples
  std::unique_ptr<DeviceInput> test_input_;  // the test set's way to the device, made at the first evaluation
  Evaluator evaluator_;  // its buffers, kept: later evaluations allocate nothing (graphs outlive them)
  // Rank 0, lr_scaling = 'adascale' with B adaptive: the noise scale every rank's
  // learning-rate gain follows (sent in the Control).
  bool adascale_ = false;
  NoiseScale noise_;
};

}  // namespace tandem
