#include "engine/train/control.hpp"

#include <algorithm>
#include <cmath>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

// The wire's layout: rank 0's fields, then one local batch and one group per rank,
// then one nonfinite flag per rank (written by that rank), then one micro-batch count
// per rank (0: the plan gives none).
enum Field : size_t {
  kStop,
  kPause,
  kCheckpoint,
  kHasPlan,
  kMode,
  kK,
  kLocalSteps,
  kStaleness,
  kSyncEvery,
  kHasSlowdown,
  kSlowWorker,
  kSlowSpeed,
  kSlowIterations,
  kNoiseScale,  // 0: none sent
  kFields
};

// Integers travel as floats: exact up to 2^24, which every count here is far below.
float exact(int64_t v, const char* what) {
  TANDEM_CHECK(std::llabs(v) < (int64_t{1} << 24), "the control message cannot carry ", what, " = ", v,
               " (integers travel as floats, exact below 2^24; a bug in tandem or an impossible plan)");
  return static_cast<float>(v);
}
int64_t integer(float v) { return std::llround(v); }
bool flag(float v) { return v > 0.5f; }

}  // namespace

bool Control::any_nonfinite() const { return std::find(nonfinite.begin(), nonfinite.end(), true) != nonfinite.end(); }

std::string Control::nonfinite_ranks() const {
  std::string out;
  for (size_t r = 0; r < nonfinite.size(); ++r)
    if (nonfinite[r]) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

size_t ControlWire::floats() const { return kFields + 4 * static_cast<size_t>(world_); }

void ControlWire::encode(const Control& c, int rank, float* out) const {
  std::fill(out, out + floats(), 0.0f);
  const size_t n = static_cast<size_t>(world_);
  if (rank == 0) {
    out[kStop] = c.stop ? 1.0f : 0.0f;
    out[kPause] = c.pause ? 1.0f : 0.0f;
    out[kCheckpoint] = c.checkpoint ? 1.0f : 0.0f;
    if (c.plan) {
      const Plan& p = *c.plan;
      TANDEM_CHECK(p.local_batch.size() == n, "a plan for ", p.local_batch.size(), " workers sent to ", world_,
                   " (a bug in tandem)");
      out[kHasPlan] = 1.0f;
      out[kMode] = exact(static_cast<int>(p.sync.mode), "the sync mode");
      out[kK] = exact(p.sync.k, "sync.k");
      out[kLocalSteps] = exact(p.sync.local_steps, "sync.local_steps");
      out[kStaleness] = exact(p.sync.staleness, "sync.staleness");
      out[kSyncEvery] = exact(p.sync.sync_every, "sync.sync_every");
      for (size_t r = 0; r < n; ++r) {
        out[kFields + r] = exact(p.local_batch[r], "a local batch");
        out[kFields + n + r] = p.sync.group.empty() ? 0.0f : exact(p.sync.group[r], "a sync group");
        if (!p.micro_batches.empty()) out[kFields + 3 * n + r] = exact(p.micro_batches[r], "a micro-batch count");
      }
    }
    if (c.slowdown) {
      out[kHasSlowdown] = 1.0f;
      out[kSlowWorker] = exact(c.slowdown->worker, "a slowdown's worker");
      out[kSlowSpeed] = static_cast<float>(c.slowdown->speed);
      out[kSlowIterations] = exact(c.slowdown->iterations, "a slowdown's iterations");
    }
    if (c.noise_scale && *c.noise_scale > 0.0 && std::isfinite(*c.noise_scale))
      out[kNoiseScale] = static_cast<float>(std::min(*c.noise_scale, 1e30));
  }
  if (static_cast<size_t>(rank) < c.nonfinite.size() && c.nonfinite[static_cast<size_t>(rank)])
    out[kFields + 2 * n + static_cast<size_t>(rank)] = 1.0f;
}

Control ControlWire::decode(const float* in) const {
  Control c;
  const size_t n = static_cast<size_t>(world_);
  c.stop = flag(in[kStop]);
  c.pause = flag(in[kPause]);
  c.checkpoint = flag(in[kCheckpoint]);
  if (in[kNoiseScale] > 0.0f) c.noise_scale = static_cast<double>(in[kNoiseScale]);
  if (flag(in[kHasPlan])) {
    Plan p;
    p.sync.mode = static_cast<SyncMode>(integer(in[kMode]));
    p.sync.k = static_cast<int>(integer(in[kK]));
    p.sync.local_steps = static_cast<int>(integer(in[kLocalSteps]));
    p.sync.staleness = static_cast<int>(integer(in[kStaleness]));
    p.sync.sync_every = static_cast<int>(integer(in[kSyncEvery]));
    for (size_t r = 0; r < n; ++r) {
      p.local_batch.push_back(integer(in[kFields + r]));
      if (p.sync.mode == SyncMode::grouped) p.sync.group.push_back(static_cast<int>(integer(in[kFields + n + r])));
      if (in[kFields + 3 * n + r] > 0.5f) p.micro_batches.push_back(integer(in[kFields + 3 * n + r]));
    }
    if (p.micro_batches.size() != n) p.micro_batches.clear();  // none sent
    c.plan = std::move(p);
  }
  if (flag(in[kHasSlowdown])) {
    SlowdownRequest s;
    s.worker = static_cast<int>(integer(in[kSlowWorker]));
    s.speed = in[kSlowSpeed];
    s.iterations = integer(in[kSlowIterations]);
    c.slowdown = s;
  }
  c.nonfinite.resize(n);
  for (size_t r = 0; r < n; ++r) c.nonfinite[r] = flag(in[kFields + 2 * n + r]);
  return c;
}

}  // namespace tandem
