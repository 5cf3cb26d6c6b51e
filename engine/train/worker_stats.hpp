#pragma once
// What every rank measures about one iteration, sent to rank 0 as one fixed-size
// message (trivially copyable: it travels as bytes). Times are ms; start_ms is
// relative to the rank's clock origin, taken right after a start-up barrier, so
// tracks of one host line up. Who shows which field (the policy, the console, the
// trace) is declared once, in worker_stats_fields.hpp: a field added here gets a row
// there.
#include <cstdint>
#include <type_traits>

namespace tandem {

struct WorkerStats {
  int32_t rank = 0;
  int32_t valid = 0;  // 0 for the placeholder report of "iteration -1"
  int64_t iteration = -1;
  int64_t local_batch = 0;
  int64_t micro_batches = 1;  // the micro-batches the local batch was computed in (a plan's, or accumulate)
  double start_ms = 0.0;    // iteration start on this rank's clock
  // Where the compute ended and the gradient sync began, on the same clock (0: not
  // measured; relaxed segments and tandem sim lay their phases end to end from
  // start_ms). The Perfetto trace draws from these rather than from summed
  // durations: an emulated compute_ms is the modelled device's time, counted from
  // the last sync (progress.hpp), so it may overlap this rank's real data loading
  // and optimizer step, and durations laid end to end ran into the next iteration.
  double compute_end_ms = 0.0;
  double sync_start_ms = 0.0;
  double data_ms = 0.0;     // sampling and gathering the batch
  double compute_ms = 0.0;  // forward + backward, including emulated stretch
  double real_compute_ms = 0.0;  // forward + backward as really measured
  // Waiting for slower ranks before the gradient all-reduce, kept out of comm_ms so
  // comm_ms is the transfer alone (as well as an arrival barrier can separate them:
  // the barrier's own latency counts as idle).
  double idle_ms = 0.0;
  double comm_ms = 0.0;     // the gradient all-reduce, emulated link delay included
  // Gradient buckets (engine/train/sync/gradient_buckets.hpp), summed from the
  // backward pass on: where the first bucket's sum started (start_ms's clock; 0
  // without buckets), how long the sums took from there to the last one's end, and
  // how many there were. comm_ms is then the part of them after every rank arrived:
  // what the backward pass did not hide (exposed).
  double buckets_start_ms = 0.0;
  double allreduce_ms = 0.0;
  int64_t buckets = 0;
  double stats_ms = 0.0;    // posting and completing the stats report to rank 0
  double optimizer_ms = 0.0;  // 0 for a fused step: its compute_ms holds the update (engine/train/step.hpp)
  double step_ms = 0.0;     // the whole iteration on this rank
  double samples_per_s = 0.0;  // local_batch / compute time
  double loss_sum = 0.0;
  int64_t correct = 0;
  double memory_mb = 0.0;   // device memory held by tensors
  double speed = 1.0;       // emulated speed multiplier this iteration (1 without emulation)
  // Relaxed synchronisation (plan.hpp SyncMode). Outside bsp, stats reach rank 0 at
  // the points where all workers meet, and cover every iteration since the last:
  // the times above are then means per iteration.
  int64_t steps = 1;        // iterations these stats cover on this rank
  double grad_sq = 0.0;     // |g / b|^2: squared norm of this rank's mean gradient (bsp, local)
  double staleness = 0.0;   // mean server versions its updates were behind (grouped, ksync)
  int64_t pushes = 0;       // gradients it sent to the parameter server
  int32_t group = 0;        // the group it ran in (0-based)
  int32_t sync_mode = 0;    // the SyncMode it ran under
  char host[32] = {};       // where the rank runs (truncated), for the console
  char device[48] = {};     // what it computes on (truncated)
};

// What the policy gets about the whole cluster next to the per-worker stats.
struct ClusterStats {
  int32_t sync_mode = 0;        // SyncMode the stats were measured under
  double global_grad_sq = -1.0; // bsp: |G / B|^2 of the global mean gradient; < 0: not measured
  double iterations = 1.0;      // global batches' worth of training these stats cover
  int64_t updates = 0;          // server updates applied since the last stats
  int64_t dropped = 0;          // gradients the server dropped since the last stats (ksync)
  double server_busy_ms = 0.0;  // time the server spent applying them
};

static_assert(std::is_trivially_copyable_v<WorkerStats>, "WorkerStats travels as bytes");


}  // namespace tandem
