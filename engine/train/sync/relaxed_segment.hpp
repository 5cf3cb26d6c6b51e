#pragma once
// The relaxed synchronisation modes on the worker's side (plan.hpp SyncMode): a
// segment is the stretch of training between two points where every worker meets.
//   local:          H iterations of local SGD (each worker steps alone on its slice),
//                   then the meeting averages the models (and momenta), weighted by
//                   the samples each worker trained on.
//   grouped, ksync: workers push gradients to the parameter server (a thread of
//                   rank 0, parameter_server.hpp) and continue from the weights it
//                   sends back, until a reply says "meet"; the meeting then gives
//                   every worker the server's weights and momentum.
// Outside segments (bsp) every iteration is a meeting. At a meeting all ranks hold
// the same weights, momentum and version, so the mode may change there: no update
// is lost or applied twice across a switch (the server's totals count them).
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/dist/comm.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/emulation/calibration.hpp"
#include "engine/train/config.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/emulation/faults.hpp"
#include "engine/train/nonfinite.hpp"
#include "engine/train/sync/parameter_server.hpp"
#include "engine/train/plan.hpp"
#include "engine/train/step.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

struct SegmentResult {
  int64_t iterations = 0;   // global batches' worth of training done
  WorkerStats stats;        // this rank's, times as means per step
  ServerTotals server;      // rank 0: the server's totals for the segment
  int64_t skipped = 0;      // local: this rank's local steps skipped for a NaN or Inf
  double end_ms = 0.0;      // when the meeting ended (the next emulated step's anchor)
  double segment_ms = 0.0;  // from the segment's start to the meeting's end
};

class SegmentRunner {
public:
  SegmentRunner(const ExperimentConfig& cfg, Comm& comm, Model& model, Optimizer& optimizer, TrainStep& step,
                BatchLoader& loader, const Emulator& emulator, const DeviceProfile& machine,
                const LrSchedule& schedule);
  ~SegmentRunner();

  // Runs one segment of `plan` starting at iteration t, at most `max_iterations`
  // global batches long (the next evaluation or the end), then the meeting.
  // anchor: where the emulated timeline starts (the end of the last collective).
  // version: the weights' version, agreed by all ranks at the meeting.
  SegmentResult run(const Plan& plan, int64_t t, int64_t max_iterations, double anchor, double origin,
                    int64_t* version);

  // Steps whose real compute outlasted their emulated time (oversubscribed cores).
  int64_t overruns() const { return overruns_; }
  // Injected faults (faults.hpp) for the segments' steps too.
  void set_faults(const FaultInjector* faults) { faults_ = faults; }

private:
  SegmentResult run_local(const Plan& plan, int64_t t, int64_t iterations, double anchor, double origin);
  SegmentResult run_server(const Plan& plan, int64_t t, int64_t max_iterations, double anchor, double origin,
                           int64_t* version);
  // Emulated compute for one step: sleeps until the worker's emulated device would
  // be done; returns the compute time to report.
  double emulate(int64_t iteration, int64_t local_batch, double anchor, double real_ms);
  // Loads this rank's slice of `iteration` and computes its gradient (emulated time
  // included); the stats of that much.
  WorkerStats compute(int64_t iteration, int64_t local_batch, int64_t offset, double anchor);
  GroupComm& group_comm(const Plan& plan);
  // Host copies of the model's parameters and momentum (GPU workers stage them).
  void params_to_host(std::vector<float>& p, std::vector<float>& v);
  void params_from_host(const std::vector<float>& p, const std::vector<float>& v);

  const ExperimentConfig& cfg_;
  Comm& comm_;
  Model& model_;
  Optimizer& optimizer_;
  // SGD's momentum (null without one): the relaxed modes average and hand it over at
  // the meetings. They run with SGD only (plan.hpp bsp_only_reason).
  Tensor* velocity_ = nullptr;
  TrainStep& step_;
  BatchLoader& loader_;
  const Emulator& emulator_;
  const DeviceProfile& machine_;
  const LrSchedule& schedule_;
  int rank_, world_;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<ParameterServer> server_;  // rank 0
  std::vector<int> groups_of_;               // the groups group_ was split for
  int64_t overruns_ = 0;
  const FaultInjector* faults_ = nullptr;
  NonfiniteStreak nonfinite_;  // local: this rank's skipped local steps
  double server_iterations_ = 0.0;           // global batches the server segments applied, exactly
  int64_t server_counted_ = 0;               // ... and as counted in whole iterations
  std::unique_ptr<GroupComm> group_;
  std::vector<float> host_params_, host_velocity_, grads_;
  std::vector<char> message_;  // a push or a reply: header, then the floats
};

}  // namespace tandem
