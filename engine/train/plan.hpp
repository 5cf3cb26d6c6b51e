#pragma once
// The Plan of one iteration: each rank's local batch b_r, with sum b_r = B (the
// global batch), and where each rank's slice starts in the sampler's global batch.
// Ranks with b_r = 0 still join every collective (with a zero gradient), so they
// stay in step instead of hanging the others.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/train/config.hpp"

namespace tandem {

struct ExperimentConfig;

// How the workers synchronise (engine/train/sync/relaxed_segment.hpp has the how of
// the relaxed ones):
//   bsp      every worker's gradient is all-reduced every iteration (the default);
//   grouped  groups all-reduce inside and push their summed update to a parameter
//            server asynchronously (one group = bsp, one worker a group = ASGD);
//   ksync    the server applies an update once the first k workers' gradients for
//            its current version are in; later ones are dropped;
//   local    local SGD: every worker steps alone, models averaged every H iterations.
enum class SyncMode : int { bsp = 0, grouped = 1, ksync = 2, local = 3 };
const char* sync_mode_name(SyncMode mode);
// The mode named `name`, or false when there is none. The whole name counts:
// 'bsp\0evil' (read with its length from Lua) is no mode.
bool parse_sync_mode(const std::string& name, SyncMode* mode);
// Whether a number read from outside (a checkpoint, the policy worker) is a SyncMode.
inline bool known_sync_mode(int32_t mode) {
  return mode >= 0 && mode <= static_cast<int32_t>(SyncMode::local);
}

struct WorkerStats;
// Whether a stats record read from outside (a checkpoint's bytes) sits in its own
// slot (rank) with values later code indexes by (group, sync mode) in range: the
// recorder and the policy's history take only such records.
bool stats_record_fits(const WorkerStats& w, int rank, int world);

// The most iterations local SGD runs between model averages (sync.local_steps in
// experiment.lua says the same): past it the workers train apart for whole runs.
constexpr int kMaxLocalSteps = 10000;

struct SyncPlan {
  SyncMode mode = SyncMode::bsp;
  std::vector<int> group;  // grouped: each rank's group, 0..G-1, every group non-empty
  int k = 0;               // ksync: how many workers' gradients make an update (1..N)
  int local_steps = 1;     // local: H, iterations between model averages
  int staleness = 1;       // grouped: S, server versions a computing group's weights may
                           // fall behind before faster groups wait for it
  int sync_every = 10;     // grouped, ksync: global batches' worth of updates between
                           // the points where every worker meets (evaluations, plan
                           // changes, the policy's next look)

  int groups() const;  // G (1 unless grouped)
  bool operator==(const SyncPlan& o) const {
    return mode == o.mode && group == o.group && k == o.k && local_steps == o.local_steps &&
           staleness == o.staleness && sync_every == o.sync_every;
  }
  bool operator!=(const SyncPlan& o) const { return !(*this == o); }
  std::string str() const;  // "bsp", "grouped [0, 0, 1, 1] S=1", "ksync k=3", "local H=4"

  // The experiment's sync settings (sync = {...}) as a plan's; one worker: bsp.
  // Throws a tandem::Error for an unknown mode.
  static SyncPlan initial(const ExperimentConfig& cfg, int world_size);
};

// The most micro-batches a worker's local batch may be computed in (a plan's
// micro_batches): past it a worker's fixed costs would swamp any balance.
constexpr int64_t kMaxMicroBatches = 1024;

struct Plan {
  std::vector<int64_t> local_batch;  // one per rank
  SyncPlan sync;
  // Per rank, the micro-batches its local batch is computed in (gradients summed, as
  // `accumulate` does): a worker may take more samples than fit its memory at once
  // (issue 37: the min-max chooses them with the local batches). Empty: every rank
  // uses the experiment's `accumulate`. bsp only.
  std::vector<int64_t> micro_batches = {};

  int64_t global_batch() const;
  int64_t offset(int rank) const;  // first position of rank's slice
  // Rank's micro-batch count: its entry, or `fallback` (the experiment's accumulate).
  int64_t micro(int rank, int64_t fallback) const;
  // No entry above 1 (none given, or all 1).
  bool micro_counts_trivial() const;
  // Throws a tandem::Error naming what is wrong (sizes, negatives, the sum, the
  // sync mode's settings).
  void validate(int world_size, int64_t global_batch) const;
  std::string str() const;  // "[1, 3, 40, 84]", then the sync mode unless bsp

  // B split as evenly as possible; the first B mod N ranks take one more.
  static Plan equal(int world_size, int64_t global_batch);
  // b_r proportional to weights[r], rounded by largest remainder so the sum is B.
  static Plan proportional(const std::vector<double>& weights, int64_t global_batch);
  // Each worker's samples/s when it runs local_batch[r] samples (the emulator's
  // throughput over this machine's calibration).
  using Throughput = std::function<std::vector<double>(const std::vector<int64_t>& local_batch)>;
  // The plan both `tandem run` and `tandem sim` start from, validated: plan.kind
  // `equal`, `fixed` (plan.batches) or `proportional`, with SyncPlan::initial.
  // `proportional` gives each worker a share proportional to its throughput at the
  // batch it will run: samples/s depends on the batch (fixed costs weigh more on
  // small batches), so the split, from the equal one, is refined 8 times, until the
  // shares it gives reproduce themselves. It needs the emulation (its speeds are
  // what it divides by): without one it throws.
  static Plan initial(const ExperimentConfig& cfg, int world_size, const Throughput& throughput);
  // A different uneven split every iteration, zeros included, from the seed: a test
  // of the engine (any plan must give the same training), not a balancing policy.
  static Plan random(int world_size, int64_t global_batch, uint64_t seed);
  // The same with a global batch drawn from [min_batch, max_batch] first, from the
  // seed alone (one worker and many draw the same B: the exactness tests).
  static Plan random(int world_size, int64_t min_batch, int64_t max_batch, uint64_t seed);
};

// Why this experiment trains with bsp only ("" when the relaxed modes may run): their
// server and local steps are plain SGD over a classifier's mean gradient, so AdamW,
// clipping and a language model's per-token mean are bsp's. A policy's plan with
// another mode is refused with this reason (the last good plan stays).
std::string bsp_only_reason(const ExperimentConfig& cfg);

}  // namespace tandem
