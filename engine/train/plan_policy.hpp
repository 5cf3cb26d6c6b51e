#pragma once
// The seam between the training loop and whatever decides the next plan. The loop
// (train/) knows only this interface; the Lua policy host (script/policy_host.hpp)
// implements it, so the arrows still point down (DESIGN.md: script knows train).
//
// Timing contract, on rank 0, in iteration t:
//   every rank's stats of t-1 are in -> submit() them -> forward + backward (the
//   policy decides meanwhile, on its own thread) -> collect() the decision ->
//   gradient all-reduce (the decision rides with it to every rank, control.hpp)
//   -> the plan is in force from t+1.
// So the decision on iteration t's stats applies from iteration t+2, and its latency
// hides behind a whole forward + backward. collect() waits for the call in flight
// (at most the policy's budget on the clock), which makes the plan sequence
// deterministic: the same stats give the same plans at the same iterations. The
// budget itself counts the call's CPU time (script/budget.hpp), so on a loaded
// machine a call can outlast that wait without failing: its answer is then late,
// taken at a later boundary, and the plan in force stays meanwhile.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/train/plan.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

// What the trace gets about one policy decision.
struct PolicyReport {
  int64_t from_iteration = -1;  // the stats the decision was made on
  std::string policy;           // file name of the policy that decided
  // plan (a new plan) | keep (nil, or the plan in force) | rejected (an invalid plan)
  // | error / timeout / memory (raised, ran past its budget or memory) | crash / hung
  // (its worker process died, or was killed past its deadline) | swapped /
  // swap_failed (hot swap, the new policy's dry run decided) | disabled (too many
  // failures: last good plan kept) | late (still deciding past its budget: the plan
  // stays, the answer comes at a later boundary) | idle (nothing was asked)
  std::string event = "idle";
  std::string reason;           // the policy's reason, or why it was rejected / failed
  bool failed = false;          // the call failed (its event may say disabled: the last straw)
  double cost_ms = 0.0;         // time spent inside the policy's Lua calls
  double wait_ms = 0.0;         // time the training loop waited for the decision
  std::vector<int64_t> plan;    // the new plan, for event plan / swapped
  std::string sync;             // its sync mode (SyncPlan::str()), with the plan
  int64_t applies_from = -1;    // the first iteration that runs it (set by the trainer)
  // The quantities behind the decision, as the policy returned them (metrics =
  // {...}: noise scale, predicted goodput, ...), sorted by name.
  std::vector<std::pair<std::string, double>> metrics;
};

class PlanPolicy {
public:
  virtual ~PlanPolicy() = default;
  // Iteration t's stats (by rank; their local batches are the plan they ran);
  // returns at once, the policy decides in the background.
  virtual void submit(int64_t iteration, const std::vector<WorkerStats>& stats,
                      const ClusterStats& cluster = ClusterStats{}) = 0;
  // The decision on the last submit: a validated plan, or nothing (keep the plan).
  // Waits for a call in flight up to its budget; never longer.
  virtual std::optional<Plan> collect(PolicyReport& report) = 0;
  // For checkpoints, between a collect() and the next submit(): the policy's name
  // and its state (its save(), as a Lua literal; "" when it has none or is busy),
  // and handing such a state back (false when the policy cannot take it).
  virtual std::string name() const { return ""; }
  virtual std::string saved_state() { return ""; }
  virtual bool restore_state(const std::string& state) { return false; }
  // The stats window the policy sees as stats.history (bytes of this build), and
  // handing one back with the sync mode of the plan in force, for a resumed run.
  virtual std::string saved_window() { return ""; }
  virtual bool restore_window(const std::string& bytes, const SyncPlan& in_force) { return false; }
};

}  // namespace tandem
