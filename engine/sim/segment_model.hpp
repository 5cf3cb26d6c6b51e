#pragma once
// The relaxed synchronisation modes (plan.hpp SyncMode) as the simulator runs them:
// one segment, from one meeting of every worker to the next, as the engine runs it
// (engine/train/sync/relaxed_segment.hpp).
//   local:   H steps each, then the model average (a ring of parameters and momenta).
//   ksync:   every round, each worker computes from the same weights; the update
//            lands with the k-th arrival plus the server's round trip, and the later
//            workers' gradients are dropped (here they restart with the new
//            weights at once, a slight favour to ksync: the engine's finish their
//            stale step first).
//   grouped: each group computes, all-reduces inside and pushes; an event loop over
//            the groups' completion times, the staleness bound holding replies as
//            the server does; updates in flight when the segment's samples are in
//            still land.
#include <cstdint>
#include <vector>

#include "engine/sim/compute_model.hpp"
#include "engine/sim/network_model.hpp"
#include "engine/train/plan.hpp"
#include "engine/train/record/trace.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

class SegmentModel {
public:
  // Keeps references: both models outlive this one.
  SegmentModel(const ComputeModel& compute, const NetworkModel& network);

  // One segment of `plan` (not bsp) from iteration t, at most max_iterations global
  // batches long: advances clock_ms, leaves each worker's stats (means per step) in
  // `stats` (one per worker) and the segment's record in `rec` (a fresh one), and
  // returns the iteration it ends at.
  int64_t run(const Plan& plan, int64_t t, int64_t max_iterations, double& clock_ms, std::vector<WorkerStats>& stats,
              SyncRecord& rec) const;

private:
  const ComputeModel& compute_;
  const NetworkModel& network_;
};

}  // namespace tandem
