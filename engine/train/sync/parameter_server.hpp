#pragma once
// The parameter server of the grouped and ksync modes (plan.hpp SyncMode): a thread
// of rank 0 holding the master weights and the optimizer's momentum, speaking to the
// workers over a Channel of its own.
//
// grouped: each group's leader pushes the group's summed gradient (the group has
//   all-reduced it inside) with the version its weights were and its sample count;
//   the server applies it at once, as lr * (sum / B + wd * samples / B * w): a group
//   carrying a share of the global batch moves the weights by that share, so one
//   group is exactly bsp, and a round of G groups sums to one bsp step taken at
//   staler weights. The reply brings the new weights. Staleness bound S: a reply is
//   held while the version is more than S ahead of the weights some other group is
//   still computing on (groups waiting for a reply are not computing), so a fast
//   group waits for the slowest instead of running away from it; the slowest never
//   waits, so there is no deadlock. Pushes already in flight still land, so an
//   applied update can be up to S + G - 1 versions stale.
// ksync: every worker pushes its own gradient. Pushes for the current version
//   accumulate; the k-th applies their mean (sum / their samples) and every one of the
//   k gets the new weights. A push for an older version is dropped and its sender gets
//   the current weights at once: folding it into the next version would make that
//   version stale, and ksync's point is that no update is.
//
// Momentum in grouped mode with 2 or more groups: with slow_momentum = beta > 0 (the
// default) the server
//   steps without momentum inside a segment, at lr * (1 - beta) / (1 - m), and at the
//   meeting applies momentum to the segment's displacement d = start - end:
//   u = beta * u + d, weights = start - u (SlowMo, Wang et al. 2020), so the step
//   in steady state stays lr / (1 - m) per global batch. Why: momentum on every
//   push meets stale gradients, and heavy-ball SGD with one version of delay keeps
//   only 1/19 of its stable step range (lr * h < 0.2 instead of 3.8 at m = 0.9, a
//   linear analysis); two groups then needed 2-3x bsp's samples to 85%. Outer
//   momentum applied once a segment sees no delay. u travels as the workers'
//   velocity between segments (u = K * lr * v for a segment of K global batches,
//   the two agree in steady state), so checkpoints and mode switches carry it.
//   slow_momentum = 0: momentum m on every push, as a parameter server usually does.
// A segment (the server's life between two meetings of all workers) ends once
// updates worth sync_every global batches are in: from then on every reply says
// "meet", held replies are released, a partial ksync sum is applied (nothing is
// lost), and once every participant has been told the thread ends. Counting:
// every push is applied or dropped, never both, never twice; the totals say so.
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "engine/dist/comm.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/train/config.hpp"
#include "engine/train/nonfinite.hpp"
#include "engine/train/plan.hpp"

namespace tandem {

// The channel's messages: a header, then the parameter count's floats.
struct PushHeader {
  int32_t group = 0;         // grouped: the group; ksync: the rank
  int32_t rank = 0;
  int64_t base_version = 0;  // the version of the weights the gradient was computed at
  int64_t samples = 0;       // samples the gradient sums over
};
struct ReplyHeader {
  int64_t version = 0;       // of the weights that follow
  int32_t meet = 0;          // 1: the segment is over, go to the meeting
  int32_t dropped = 0;       // 1: this push came too late (ksync) and was dropped
  double staleness = 0.0;    // versions the push was behind when applied
};
constexpr int kPushTag = 71, kReplyTag = 72;

struct ServerTotals {
  int64_t received = 0, applied = 0, dropped = 0;  // pushes
  int64_t updates = 0;                             // versions made
  int64_t nonfinite = 0;                           // updates skipped for a NaN or Inf
  double staleness_sum = 0.0, staleness_max = 0.0;
  double busy_ms = 0.0;                            // applying updates and replying
  std::vector<int64_t> staleness_histogram;        // pushes applied at staleness 0, 1, 2, ...
  void add(const ServerTotals& o);
};

class ParameterServer {
public:
  // world: to end the job when the server thread fails (the workers would
  // otherwise wait for replies until their deadline).
  // max_nonfinite: updates in a row holding a NaN or Inf (skipped) after which the
  // job ends.
  ParameterServer(Comm& world, Channel& channel, size_t param_count, const OptimizerConfig& optimizer,
                  const LrSchedule& schedule, int64_t global_batch, int64_t max_nonfinite);
  ~ParameterServer();

  // Starts a segment: the master state from (params, velocity) at `version`;
  // participants are the ranks that push (grouped: each group's lowest rank;
  // ksync: every rank). first_iteration: the global iteration the segment starts
  // at (for the learning rate), from which it counts global batches' worth of
  // samples applied.
  void begin(const Plan& plan, const float* params, const float* velocity, int64_t version, int64_t first_iteration);
  // Waits for the segment to end and hands back the master state; returns the
  // segment's totals.
  ServerTotals finish(float* params, float* velocity, int64_t* version, double* iterations_done);

private:
  void serve();
  void apply(const float* grad_sum, int64_t samples, bool ksync_mean);
  void reply(int to, double staleness, bool dropped);

  Comm& world_;
  Channel& channel_;
  size_t count_;
  OptimizerConfig optimizer_;
  const LrSchedule& schedule_;
  int64_t global_batch_;
  Plan plan_;
  std::vector<int> participants_;
  std::vector<float> params_, velocity_, accum_;
  std::vector<char> message_, reply_;
  bool meet_ = false;
  std::vector<int> told_;  // participants told to meet
  int64_t version_ = 0, first_iteration_ = 0, samples_applied_ = 0;
  bool slow_ = false;            // this segment uses slow momentum (grouped, slow_momentum > 0)
  std::vector<float> start_;     // the weights the segment began at (slow momentum)
  NonfiniteStreak nonfinite_;
  ServerTotals totals_;
  std::thread thread_;
};

}  // namespace tandem
