#include "engine/train/plan.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"
#include "engine/train/config.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

int64_t Plan::global_batch() const { return std::accumulate(local_batch.begin(), local_batch.end(), int64_t{0}); }

int64_t Plan::offset(int rank) const {
  return std::accumulate(local_batch.begin(), local_batch.begin() + rank, int64_t{0});
}

void Plan::validate(int world_size, int64_t global_batch_size) const {
  TANDEM_CHECK_HINT(world_size >= 1 && global_batch_size >= 0, "a plan is for 1 or more workers and a global batch "
                    "of 0 or more", "plan ", str(), " checked for ", world_size, " workers and global batch ",
                    global_batch_size);
  TANDEM_CHECK_HINT(local_batch.size() == static_cast<size_t>(world_size),
                    "give one local batch per worker (plan.batches)", "plan ", str(), " has ", local_batch.size(),
                    " local batches for ", world_size, " workers");
  // Summed without overflow, however large the batches: each is at most what is
  // left of the global batch.
  int64_t sum = 0;
  for (size_t r = 0; r < local_batch.size(); ++r) {
    TANDEM_CHECK_HINT(local_batch[r] >= 0, "local batches must be 0 or more", "plan ", str(), " gives rank ", r,
                      " a negative batch");
    TANDEM_CHECK_HINT(local_batch[r] <= global_batch_size - sum, "make the local batches add up to global_batch",
                      "plan ", str(), " sums to more than the global batch ", global_batch_size);
    sum += local_batch[r];
  }
  TANDEM_CHECK_HINT(sum == global_batch_size, "make the local batches add up to global_batch", "plan ", str(),
                    " sums to ", sum, ", not the global batch ", global_batch_size);
  const int n = world_size;
  if (!micro_batches.empty()) {
    TANDEM_CHECK_HINT(micro_batches.size() == static_cast<size_t>(n),
                      "give one micro-batch count per worker (micro_batches = {k1, ..., kN})", "plan ", str(), " has ",
                      micro_batches.size(), " micro-batch counts for ", n, " workers");
    for (size_t r = 0; r < micro_batches.size(); ++r)
      TANDEM_CHECK_HINT(micro_batches[r] >= 1 && micro_batches[r] <= kMaxMicroBatches,
                        "give each worker 1 to " + std::to_string(kMaxMicroBatches) + " micro-batches", "plan ", str(),
                        " gives rank ", r, " ", micro_batches[r], " micro-batches");
    TANDEM_CHECK_HINT(sync.mode == SyncMode::bsp || micro_counts_trivial(), "use micro-batches with sync mode bsp",
                      "plan ", str(), ": micro-batches per worker are for bsp, not ", sync_mode_name(sync.mode));
  }
  const int mode = static_cast<int>(sync.mode);
  TANDEM_CHECK_HINT(mode >= 0 && mode <= static_cast<int>(SyncMode::local),
                    "use sync mode bsp, grouped, ksync or local", "plan ", str(), " has sync mode number ", mode);
  switch (sync.mode) {
    case SyncMode::bsp:
      break;
    case SyncMode::grouped: {
      TANDEM_CHECK_HINT(sync.group.size() == static_cast<size_t>(n),
                        "give one group per worker (groups = {1, 1, 2, ...})", "plan ", str(), " has ",
                        sync.group.size(), " group entries for ", n, " workers");
      // Every group number in range before any is used as an index.
      for (int r = 0; r < n; ++r) {
        const int grp = sync.group[static_cast<size_t>(r)];
        TANDEM_CHECK_HINT(grp >= 0 && grp < n, "number groups 1..G (0..G-1 in C++)", "plan ", str(), " puts rank ", r,
                          " in group ", grp);
      }
      const int g = sync.groups();
      std::vector<int64_t> batch(static_cast<size_t>(g), 0);
      std::vector<int> members(static_cast<size_t>(g), 0);
      for (int r = 0; r < n; ++r) {
        const int grp = sync.group[static_cast<size_t>(r)];
        ++members[static_cast<size_t>(grp)];
        batch[static_cast<size_t>(grp)] += local_batch[static_cast<size_t>(r)];
      }
      for (int i = 0; i < g; ++i) {
        TANDEM_CHECK_HINT(members[static_cast<size_t>(i)] > 0, "number the groups without gaps", "plan ", str(),
                          " has no worker in group ", i);
        TANDEM_CHECK_HINT(batch[static_cast<size_t>(i)] > 0, "give every group some samples", "plan ", str(),
                          " gives group ", i, " no samples: its updates would carry nothing");
      }
      TANDEM_CHECK_HINT(sync.staleness >= 0, "set staleness >= 0", "plan ", str(), " has a negative staleness bound");
      break;
    }
    case SyncMode::ksync:
      TANDEM_CHECK_HINT(sync.k >= 1 && sync.k <= n, "set k between 1 and the number of workers", "plan ", str(),
                        " waits for ", sync.k, " of ", n, " workers");
      for (int r = 0; r < n; ++r)
        TANDEM_CHECK_HINT(local_batch[static_cast<size_t>(r)] > 0, "give every worker samples in ksync mode", "plan ",
                          str(), " gives rank ", r, " no samples: its gradient would count as one of the k");
      break;
    case SyncMode::local:
      TANDEM_CHECK_HINT(sync.local_steps >= 1 && sync.local_steps <= kMaxLocalSteps,
                        "set local_steps (H) from 1 to " + std::to_string(kMaxLocalSteps) +
                            " (the experiment's sync.local_steps has the same bound)",
                        "plan ", str(), " averages every ", sync.local_steps, " iterations");
      break;
  }
  if (sync.mode == SyncMode::grouped || sync.mode == SyncMode::ksync)
    TANDEM_CHECK_HINT(sync.sync_every >= 1, "set sync_every >= 1", "plan ", str(), " meets every ", sync.sync_every,
                      " global batches");
}

int64_t Plan::micro(int rank, int64_t fallback) const {
  return static_cast<size_t>(rank) < micro_batches.size() ? micro_batches[static_cast<size_t>(rank)] : fallback;
}

bool Plan::micro_counts_trivial() const {
  return std::all_of(micro_batches.begin(), micro_batches.end(), [](int64_t k) { return k == 1; });
}

std::string Plan::str() const {
  std::string s = "[";
  for (size_t i = 0; i < local_batch.size(); ++i) s += (i ? ", " : "") + std::to_string(local_batch[i]);
  s += "]";
  if (!micro_counts_trivial()) {
    s += " in micro-batches [";
    for (size_t i = 0; i < micro_batches.size(); ++i) s += (i ? ", " : "") + std::to_string(micro_batches[i]);
    s += "]";
  }
  if (sync.mode != SyncMode::bsp) s += " " + sync.str();
  return s;
}

const char* sync_mode_name(SyncMode mode) {
  switch (mode) {
    case SyncMode::bsp: return "bsp";
    case SyncMode::grouped: return "grouped";
    case SyncMode::ksync: return "ksync";
    case SyncMode::local: return "local";
  }
  return "?";
}

bool parse_sync_mode(const std::string& name, SyncMode* mode) {
  for (SyncMode m : {SyncMode::bsp, SyncMode::grouped, SyncMode::ksync, SyncMode::local})
    if (name == sync_mode_name(m)) {
      *mode = m;
      return true;
    }
  return false;
}

int SyncPlan::groups() const {
  if (mode != SyncMode::grouped || group.empty()) return 1;
  return *std::max_element(group.begin(), group.end()) + 1;
}

std::string SyncPlan::str() const {
  std::string s = sync_mode_name(mode);
  switch (mode) {
    case SyncMode::bsp:
      break;
    case SyncMode::grouped:
      s += " [";
      for (size_t i = 0; i < group.size(); ++i) s += (i ? ", " : "") + std::to_string(group[i]);
      s += "] S=" + std::to_string(staleness) + " every " + std::to_string(sync_every);
      break;
    case SyncMode::ksync:
      s += " k=" + std::to_string(k) + " every " + std::to_string(sync_every);
      break;
    case SyncMode::local:
      s += " H=" + std::to_string(local_steps);
      break;
  }
  return s;
}

Plan Plan::equal(int world_size, int64_t global_batch_size) {
  TANDEM_CHECK_HINT(world_size >= 1 && global_batch_size >= 0, "set workers >= 1 and global_batch >= 0",
                    "an equal split of ", global_batch_size, " samples over ", world_size, " workers");
  Plan p;
  for (int r = 0; r < world_size; ++r)
    p.local_batch.push_back(global_batch_size / world_size + (r < global_batch_size % world_size ? 1 : 0));
  return p;
}

Plan Plan::proportional(const std::vector<double>& weights, int64_t global_batch_size) {
  for (size_t r = 0; r < weights.size(); ++r)
    TANDEM_CHECK(std::isfinite(weights[r]) && weights[r] >= 0.0, "proportional plan: worker ", r, " has weight ",
                 weights[r], "; weights are finite and 0 or more");
  TANDEM_CHECK(global_batch_size >= 0, "proportional plan of a negative global batch ", global_batch_size);
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  TANDEM_CHECK(total > 0.0 && std::isfinite(total), "proportional plan needs positive weights");
  Plan p;
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t r = 0; r < weights.size(); ++r) {
    const double exact = static_cast<double>(global_batch_size) * weights[r] / total;
    p.local_batch.push_back(static_cast<int64_t>(std::floor(exact)));
    given += p.local_batch.back();
    remainders.emplace_back(exact - std::floor(exact), r);
  }
  // Largest remainder first; ties go to the lower rank, so every rank computes the same plan.
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < global_batch_size; ++i, ++given) ++p.local_batch[remainders[i % remainders.size()].second];
  return p;
}

Plan Plan::initial(const ExperimentConfig& cfg, int world_size, const Throughput& throughput) {
  Plan plan;
  if (cfg.plan.kind == "fixed") {
    plan.local_batch = cfg.plan.batches;
  } else if (cfg.plan.kind == "proportional") {
    TANDEM_CHECK_HINT(cfg.emulation.enabled, "set emulation = {...} or use plan = {kind = 'equal'}",
                      "plan 'proportional' divides the batch by emulated speeds, but no emulation is configured");
    plan = Plan::equal(world_size, cfg.global_batch);
    for (int round = 0; round < 8; ++round) plan = Plan::proportional(throughput(plan.local_batch), cfg.global_batch);
  } else {
    plan = Plan::equal(world_size, cfg.global_batch);
  }
  plan.sync = SyncPlan::initial(cfg, world_size);
  plan.micro_batches = cfg.plan.micro_batches;
  plan.validate(world_size, cfg.global_batch);
  return plan;
}

SyncPlan SyncPlan::initial(const ExperimentConfig& cfg, int world_size) {
  SyncPlan s;
  const auto& c = cfg.plan.sync;
  TANDEM_CHECK_HINT(parse_sync_mode(c.mode, &s.mode), "use sync.mode = 'bsp', 'grouped', 'ksync' or 'local'",
                    "unknown sync mode '", c.mode, "'");
  if (world_size == 1) return SyncPlan{};
  s.k = c.k > 0 ? c.k : world_size;
  s.local_steps = c.local_steps;
  s.staleness = c.staleness;
  s.sync_every = c.sync_every;
  if (s.mode == SyncMode::grouped) {
    for (int64_t g : c.groups) s.group.push_back(static_cast<int>(g) - 1);
    if (s.group.empty()) s.group.assign(static_cast<size_t>(world_size), 0);
  }
  return s;
}

Plan Plan::random(int world_size, int64_t global_batch_size, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> weights(static_cast<size_t>(world_size));
  for (auto& w : weights) w = rng.uniform() < 0.25f ? 0.0 : static_cast<double>(rng.uniform()) + 1e-3;
  if (std::accumulate(weights.begin(), weights.end(), 0.0) == 0.0) weights[rng.below(weights.size())] = 1.0;
  return proportional(weights, global_batch_size);
}

Plan Plan::random(int world_size, int64_t min_batch, int64_t max_batch, uint64_t seed) {
  if (min_batch >= max_batch) return random(world_size, max_batch, seed);
  Rng rng(mix_seed(seed, 0x42ULL));
  const int64_t batch = min_batch + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_batch - min_batch + 1)));
  return random(world_size, batch, seed);
}

bool stats_record_fits(const WorkerStats& w, int rank, int world) {
  return w.rank == rank && (w.valid == 0 || w.valid == 1) && w.group >= 0 && w.group < world &&
         known_sync_mode(w.sync_mode) && w.local_batch >= 0;
}

std::string bsp_only_reason(const ExperimentConfig& cfg) {
  if (cfg.optimizer.name != "sgd") return "optimizer = '" + cfg.optimizer.name + "' trains with bsp only";
  if (cfg.optimizer.clip_grad_norm > 0) return "clip_grad_norm trains with bsp only";
  if (cfg.data.name == "text" || cfg.data.name == "tokens")
    return "a language model (data.name = '" + cfg.data.name + "') trains with bsp only";
  return "";
}

}  // namespace tandem
