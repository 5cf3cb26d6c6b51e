#include "engine/train/trainer.hpp"

#include <atomic>
#include <deque>
#include <limits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include <unistd.h>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/sync/gradient_sync.hpp"
#include "engine/train/emulation/calibration.hpp"
#include "engine/train/checkpoint/run_checkpoints.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/evaluate.hpp"
#include "engine/train/emulation/faults.hpp"
#include "engine/train/nonfinite.hpp"
#include "engine/train/plan.hpp"
#include "engine/train/plan_policy.hpp"
#include "engine/train/record/run_dir.hpp"
#include "engine/train/sync/relaxed_segment.hpp"
#include "engine/train/console.hpp"
#include "engine/train/step.hpp"
#include "kernels/cpu/gemm.hpp"

namespace tandem {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

// Ctrl-C ends the run at the next iteration boundary with a summary written;
// a second Ctrl-C kills it as usual.
struct InterruptGuard {
  InterruptGuard() {
    g_interrupted = false;
    std::signal(SIGINT, on_sigint);
  }
  ~InterruptGuard() { std::signal(SIGINT, SIG_DFL); }
};

// Rank 0 makes the run directory and tells the others where it is.
std::string shared_run_dir(const ExperimentConfig& cfg, Comm& comm) {
  char path[4096] = {0};
  if (comm.rank() == 0) {
    const std::string dir = make_run_dir(cfg.out_dir, cfg.name);
    TANDEM_CHECK(dir.size() < sizeof path, "run directory path too long: ", dir);
    std::memcpy(path, dir.c_str(), dir.size());
  }
  comm.broadcast(path, sizeof path, "sharing the run directory");
  return path;
}

// Rank 0 calibrates alone (the others wait, sleeping) and every rank gets its numbers.
DeviceProfile shared_calibration(TrainStep& step, BatchLoader& loader, int64_t max_batch, Model& model,
                                 const OptimizerConfig& optimizer, Comm& comm) {
  DeviceProfile machine;
  if (comm.rank() == 0) machine = calibrate_compute(step, loader, max_batch, model, optimizer);
  // A big model calibrated on a CPU takes minutes, not a dead rank: the others' wait
  // for it gets 10 minutes at least.
  const double timeout = comm.timeout_s();
  comm.set_timeout_s(std::max(timeout, 600.0));
  size_t points = machine.ms.size();
  comm.broadcast(&points, sizeof points, "sharing the compute calibration");
  comm.set_timeout_s(timeout);
  machine.batch.resize(points);
  machine.ms.resize(points);
  machine.host_ms.resize(points);
  comm.broadcast(machine.batch.data(), points * sizeof(double), "sharing the compute calibration");
  comm.broadcast(machine.ms.data(), points * sizeof(double), "sharing the compute calibration");
  comm.broadcast(machine.host_ms.data(), points * sizeof(double), "sharing the compute calibration");
  return machine;
}


// The iteration's plan, from the experiment (a later issue lets a policy change it).
// `proportional` gives each worker a share proportional to its emulated throughput
// at the batch it will run: a worker's samples/s depends on its batch (fixed costs
// weigh more on small batches), so the split is refined a few times until the
// shares it gives reproduce themselves.
Plan initial_plan(const ExperimentConfig& cfg, const Emulator& emulator, int world, const DeviceProfile& machine) {
  Plan plan;
  if (cfg.plan.kind == "fixed") {
    plan.local_batch = cfg.plan.batches;
  } else if (cfg.plan.kind == "proportional") {
    TANDEM_CHECK_HINT(cfg.emulation.enabled, "set emulation = {...} or use plan = {kind = 'equal'}",
                      "plan 'proportional' divides the batch by emulated speeds, but no emulation is configured");
    plan = Plan::equal(world, cfg.global_batch);
    for (int round = 0; round < 8; ++round)
      plan = Plan::proportional(emulator.throughput(plan.local_batch, machine), cfg.global_batch);
  } else {
    plan = Plan::equal(world, cfg.global_batch);
  }
  plan.sync = initial_sync(cfg, world);
  plan.validate(world, cfg.global_batch);
  return plan;
}

// Batch-norm statistics summed over every rank's share of the global batch.
class CommReducer final : public BatchReducer {
public:
  explicit CommReducer(Comm& comm) : comm_(comm) {}
  void sum(double* data, size_t count) override { comm_.allreduce_sum(data, count, "the batch-norm statistics"); }

private:
  Comm& comm_;
};

// What rides after the gradients through every all-reduce, written by rank 0 (the
// other ranks write zeros, so the sum is rank 0's values): its stop decision, the
// console's pause and emulated slowdown (worker + 1, 0 for none), and the policy's
// next plan: its sync mode's settings, one local batch per worker and one group per
// worker (floats are exact: all far below 2^24), and whether rank 0 writes a
// checkpoint at the end of the iteration (the others then wait for it at a barrier
// whose deadline allows for the write). Meetings of the relaxed modes
// broadcast the same layout. After those, one flag per rank, written by that rank:
// its loss or gradient is not finite (the sum then is NaN on every rank, so every
// rank sees the same flags and skips the same step).
struct ControlTail {
  static constexpr size_t kStop = 0, kHasPlan = 1, kMode = 2, kK = 3, kLocalSteps = 4, kStaleness = 5,
                          kSyncEvery = 6, kPause = 7, kEmuWorker = 8, kEmuSpeed = 9, kEmuIterations = 10,
                          kCheckpoint = 11, kPlan = 12;
  static size_t size(int world) { return kPlan + 3 * static_cast<size_t>(world); }
  static size_t nonfinite(int world, int rank) { return kPlan + 2 * static_cast<size_t>(world) + static_cast<size_t>(rank); }
  static void write_plan(float* tail, const Plan& p, int world) {
    tail[kHasPlan] = 1.0f;
    tail[kMode] = static_cast<float>(static_cast<int>(p.sync.mode));
    tail[kK] = static_cast<float>(p.sync.k);
    tail[kLocalSteps] = static_cast<float>(p.sync.local_steps);
    tail[kStaleness] = static_cast<float>(p.sync.staleness);
    tail[kSyncEvery] = static_cast<float>(p.sync.sync_every);
    for (int r = 0; r < world; ++r) {
      tail[kPlan + static_cast<size_t>(r)] = static_cast<float>(p.local_batch[static_cast<size_t>(r)]);
      tail[kPlan + static_cast<size_t>(world + r)] =
          p.sync.group.empty() ? 0.0f : static_cast<float>(p.sync.group[static_cast<size_t>(r)]);
    }
  }
  static Plan read_plan(const float* tail, int world) {
    Plan p;
    auto at = [&](size_t i) { return static_cast<int>(std::lround(tail[i])); };
    p.sync.mode = static_cast<SyncMode>(at(kMode));
    p.sync.k = at(kK);
    p.sync.local_steps = at(kLocalSteps);
    p.sync.staleness = at(kStaleness);
    p.sync.sync_every = at(kSyncEvery);
    for (int r = 0; r < world; ++r) {
      p.local_batch.push_back(static_cast<int64_t>(std::llround(tail[kPlan + static_cast<size_t>(r)])));
      if (p.sync.mode == SyncMode::grouped) p.sync.group.push_back(at(kPlan + static_cast<size_t>(world + r)));
    }
    return p;
  }
};


}  // namespace

// The experiment's sync settings as a plan's (one rank: every mode is bsp).
SyncPlan initial_sync(const ExperimentConfig& cfg, int world) {
  SyncPlan s;
  const auto& c = cfg.plan.sync;
  TANDEM_CHECK_HINT(parse_sync_mode(c.mode, &s.mode), "use sync.mode = 'bsp', 'grouped', 'ksync' or 'local'",
                    "unknown sync mode '", c.mode, "'");
  if (world == 1) return SyncPlan{};
  s.k = c.k > 0 ? c.k : world;
  s.local_steps = c.local_steps;
  s.staleness = c.staleness;
  s.sync_every = c.sync_every;
  if (s.mode == SyncMode::grouped) {
    for (int64_t g : c.groups) s.group.push_back(static_cast<int>(g) - 1);
    if (s.group.empty()) s.group.assign(static_cast<size_t>(world), 0);
  }
  return s;
}

RunSummary train(const ExperimentConfig& cfg, Comm& comm, const DeviceChoice& device, PlanPolicy* policy,
                 const ConsoleFactory& make_console) {
  const Stopwatch wall;
  InterruptGuard interrupt_guard;
  const int rank = comm.rank(), world = comm.size();
  comm.set_timeout_s(cfg.collective_timeout_s);
  cpu::set_blas_threads(cfg.blas_threads);
  Device& dev = *device.device;
  // Where this rank runs and on what, in every report (the console's workers()).
  char host_name[64] = {};
  gethostname(host_name, sizeof host_name - 1);
  const std::string device_name = dev.name();
  auto label = [&](WorkerStats& w) {
    std::snprintf(w.host, sizeof w.host, "%s", host_name);
    std::snprintf(w.device, sizeof w.device, "%s", device_name.c_str());
  };

  auto train_set = make_dataset(cfg.data, /*train=*/true);
  auto test_set = make_dataset(cfg.data, /*train=*/false);
  TANDEM_CHECK_HINT(train_set->sample_shape() == cfg.model.input && train_set->classes() == cfg.model.classes,
                    "the model must be built for the data set's input shape and classes", "model input ",
                    shape_str(cfg.model.input), " with ", cfg.model.classes, " classes does not match data set '",
                    train_set->name(), "' (", shape_str(train_set->sample_shape()), ", ", train_set->classes(),
                    " classes)");
  GlobalSampler sampler(train_set->size(), cfg.global_batch, cfg.seed);
  const int64_t per_epoch = sampler.iterations_per_epoch();
  int64_t total = static_cast<int64_t>(std::ceil(cfg.stop.epochs * static_cast<double>(per_epoch)));
  if (cfg.stop.max_iterations) total = std::min(total, *cfg.stop.max_iterations);
  const int64_t eval_every = cfg.eval_every > 0 ? cfg.eval_every : per_epoch;

  // The same seed on every rank: identical initial weights.
  Model model(dev, cfg.model, cfg.seed, ControlTail::size(world));
  Sgd sgd(dev, model.param_count(), cfg.optimizer);
  LrSchedule schedule(cfg.schedule, cfg.optimizer.lr, per_epoch, total);
  TrainStep step(model, sgd);
  CommReducer reducer(comm);
  GradientSync gradients(model, comm, ControlTail::size(world));
  BatchLoader loader(*train_set, sampler, dev);
  Emulator emulator(cfg.emulation, world);

  // Emulated compute times stretch this machine's calibrated compute time (see
  // calibration.hpp); rank 0 measures it alone and every rank uses its numbers.
  DeviceProfile machine;
  if (cfg.emulation.enabled)
    machine = cfg.emulation.calibration ? *cfg.emulation.calibration
                                        : shared_calibration(step, loader, cfg.global_batch, model, cfg.optimizer, comm);
  Plan plan = initial_plan(cfg, emulator, world, machine);
  // With a policy (rank 0 runs it), plans arrive through the control tail.
  const bool policy_on = !cfg.policy.file.empty();
  TANDEM_CHECK(!policy_on || rank != 0 || policy != nullptr, "rank 0 was started without the experiment's policy ",
               cfg.policy.file, " (a bug in tandem's start-up)");
  std::optional<Plan> next_plan;  // received this iteration, in force from the next
  PolicyReport decision;  // the policy's decision on the stats of t-1, sent in t

  RunSummary summary;
  summary.workers = world;
  summary.parameters = static_cast<int64_t>(model.param_count());
  // The run directory is made only once data and model have loaded, so a mistake
  // there leaves no empty run behind.
  summary.run_dir = shared_run_dir(cfg, comm);
  if (rank == 0) log::add_file(summary.run_dir + "/log.txt");  // before resuming: its messages belong there
  Checkpointer checkpoints(cfg.checkpoint, summary.run_dir, model, sgd);
  // Injected faults happen once: a resumed run goes on past them.
  const FaultInjector faults(cfg.resume ? std::vector<FaultConfig>{} : cfg.faults, rank);
  // The training state a resumed run starts from (checkpoint/run_checkpoints.hpp).
  int64_t first_iteration = 0, resumed_version = 0, resumed_samples = 0;
  double resumed_train_ms = 0.0;
  std::string resumed_stats;    // the pending stats (rank 0, same cluster)
  std::string resumed_cluster;  // the cluster stats that go with them
  if (cfg.resume) {
    const CheckpointState s = resume_from(summary.run_dir, model, sgd, comm);
    checkpoints.resumed_at(s.iteration, s.train_ms);
    first_iteration = s.iteration;
    resumed_version = s.version;
    resumed_samples = s.samples;
    resumed_train_ms = s.train_ms;
    summary.test_accuracy = s.test_accuracy;
    summary.best_test_accuracy = s.best_test_accuracy;
    summary.time_to_target_s = s.time_to_target_s;
    // The same cluster continues with its plan; another one gets the experiment's
    // first plan for its size, and the policy decides from there.
    bool same_cluster = s.world == world;
    if (same_cluster) {
      try {
        s.plan.validate(world, cfg.global_batch);
      } catch (const std::exception&) {
        same_cluster = false;  // the global batch was changed on resume
      }
    }
    if (same_cluster) plan = s.plan;
    if (same_cluster && rank == 0 && s.stats_record == static_cast<int64_t>(sizeof(WorkerStats)) &&
        s.pending_stats.size() == static_cast<size_t>(world) * sizeof(WorkerStats))
      resumed_stats = s.pending_stats;
    if (same_cluster && rank == 0 && s.cluster_stats.size() == sizeof(ClusterStats)) resumed_cluster = s.cluster_stats;
    if (rank == 0 && !same_cluster)
      spdlog::info("resumed on {} worker(s) (the checkpoint's run had {}): the plan starts again from {} ({}){}", world,
                   s.world, plan.str(), cfg.plan.kind, policy_on ? "; the policy re-decides it for this cluster" : "");
    if (rank == 0 && policy && !s.policy.empty()) {
      if (!same_cluster) {
        spdlog::info("policy {} starts fresh: its saved state was for {} workers", policy->name(), s.world);
      } else if (s.policy != policy->name()) {
        spdlog::info("policy {} starts fresh: the saved state is {}'s", policy->name(), s.policy);
      } else {
        const bool history = s.policy_window.empty() || policy->restore_window(s.policy_window, plan.sync);
        const bool state = s.policy_state.empty() || policy->restore_state(s.policy_state);
        spdlog::info("policy {}: {} restored from the checkpoint", s.policy,
                     history && state ? "its state and stats history" : "not all of its state (see above) was");
      }
    }
  }
  std::unique_ptr<RunRecorder> recorder;
  if (rank == 0) {
    checkpoints.check_disk();
    write_text_file(summary.run_dir + "/config.json", cfg.resolved_json.empty() ? "{}\n" : cfg.resolved_json + "\n");
    spdlog::info("run directory {}", summary.run_dir);
    spdlog::info("{}", model.summary());
    spdlog::info("data {}: {} train / {} test samples; global batch {}, {} iterations per epoch, {} iterations",
                 train_set->name(), train_set->size(), test_set->size(), cfg.global_batch, per_epoch, total);
    spdlog::info("rank 0 computes on {}{}; gradients all-reduce in {}", dev.name(),
                 device.note.empty() ? "" : " (" + device.note + ")", gradients.path());
    spdlog::info("{} worker(s) over {}; plan {} ({})", world, comm.name(),
                 cfg.plan.kind == "random" ? "changing every iteration" : plan.str(), cfg.plan.kind);
    if (cfg.emulation.enabled) {
      spdlog::info("emulated heterogeneity:\n{}", emulator.describe());
      nlohmann::json cal{{"batch", machine.batch}, {"ms", machine.ms}, {"host_ms", machine.host_ms}};
      write_text_file(summary.run_dir + "/calibration.json", cal.dump() + "\n");
    }
    recorder = std::make_unique<RunRecorder>(cfg, summary.run_dir, world, per_epoch, total,
                                             cfg.resume ? first_iteration : -1,
                                             first_iteration - (resumed_stats.empty() ? 0 : 1));
  }
  std::unique_ptr<Console> console_owner = rank == 0 && make_console ? make_console(summary.run_dir) : nullptr;
  Console* console = console_owner.get();
  if (console) spdlog::info("console: tandem attach {}", summary.run_dir);

  comm.prepare_allreduce(model.grads_with_tail_count());
  // The clock origin: every rank starts counting right after this all-reduce.
  std::vector<WorkerStats> reports(static_cast<size_t>(world));
  if (!resumed_stats.empty()) std::memcpy(reports.data(), resumed_stats.data(), resumed_stats.size());
  WorkerStats mine;  // this rank's stats of the iteration it last finished (none yet)
  double post_ms = 0.0;  // posting them
  double ready = 1.0;
  comm.allreduce_sum(&ready, 1, "start-up");
  const double origin = now_ms();
  // Where the emulated timeline of the next iteration starts: the end of the last
  // collective (common to every rank). See the emulation step below.
  double anchor = origin;
  bool stop_after = false;

  double train_ms = resumed_train_ms;
  int64_t samples_done = resumed_samples;
  NonfiniteStreak nonfinite(cfg.max_nonfinite_steps);
  int64_t skipped_steps = 0;
  const bool has_layer_state = !model.layer_state().empty();
  std::vector<double> layer_state_before;
  bool warned_clamp = false;
  double link_delay_ms = 0.0;
  for (int r = 0; r < world; ++r) link_delay_ms = std::max(link_delay_ms, emulator.comm_delay_ms(r));
  int64_t overruns = 0;  // steps whose real compute outlasted the emulated time (contention)
  int64_t version = resumed_version;  // of the weights: every rank holds the same (checked at meetings)
  ClusterStats last_cluster;  // what the policy gets next to the stats of the last bsp iteration
  if (!resumed_cluster.empty()) std::memcpy(&last_cluster, resumed_cluster.data(), sizeof last_cluster);
  SegmentRunner segments(cfg, comm, model, sgd, step, loader, emulator, machine, schedule);
  segments.set_faults(&faults);
  if (rank == 0 && plan.sync.mode != SyncMode::bsp) spdlog::info("sync mode {}", plan.sync.str());
  if (rank == 0 && world == 1 && cfg.plan.sync.mode != "bsp")
    spdlog::info("one worker: sync.mode = '{}' is the same as bsp", cfg.plan.sync.mode);

  // A test evaluation after `done` iterations; true when the target accuracy is reached.
  auto evaluate_now = [&](int64_t done) {
    const Stopwatch eval_clock;
    const int64_t n = test_set->size();
    EvalSums sums = evaluate_range(model, *test_set, cfg.eval_batch, n * rank / world, n * (rank + 1) / world);
    comm.allreduce_sum(&sums.loss_sum, 3, "the evaluation sums");
    const double accuracy = sums.correct / sums.count;
    summary.test_accuracy = accuracy;
    summary.best_test_accuracy = std::max(summary.best_test_accuracy, accuracy);
    if (recorder)
      recorder->eval({done, static_cast<double>(done) / static_cast<double>(per_epoch), sums.loss_sum / sums.count,
                      accuracy, eval_clock.elapsed_ms(), train_ms / 1000.0});
    anchor = now_ms();  // evaluations are not training time
    if (cfg.stop.target_accuracy && accuracy >= *cfg.stop.target_accuracy) {
      if (!summary.time_to_target_s) summary.time_to_target_s = train_ms / 1000.0;
      summary.stop_reason = "target_accuracy";
      return true;
    }
    return false;
  };
  // Rank 0: a checkpoint after `done` iterations, with `in_force` the plan of the
  // next one (fault injection may end this rank half-way through the file).
  auto write_checkpoint_now = [&](int64_t done, const Plan& in_force) {
    CheckpointState s;
    s.iteration = done;
    s.world = world;
    s.seed = cfg.seed;
    s.experiment = cfg.name;
    s.plan = in_force;
    // The stats of the iteration just run, recorded during the next one: pending.
    comm.finish_reports("the stats reports, for a checkpoint");
    if (reports[0].valid) {
      s.pending_stats.assign(reinterpret_cast<const char*>(reports.data()), reports.size() * sizeof(WorkerStats));
      s.stats_record = sizeof(WorkerStats);
    }
    if (policy) {
      s.policy = policy->name();
      s.policy_state = policy->saved_state();
      s.policy_window = policy->saved_window();
      s.cluster_stats.assign(reinterpret_cast<const char*>(&last_cluster), sizeof last_cluster);
    }
    s.train_ms = train_ms;
    s.samples = samples_done;
    s.version = version;
    s.test_accuracy = summary.test_accuracy;
    s.best_test_accuracy = summary.best_test_accuracy;
    s.time_to_target_s = summary.time_to_target_s;
    checkpoints.write(s, [&] { faults.at(done - 1, "checkpoint"); });
  };
  bool console_checkpoint = false;  // asked while paused, not yet written
  // Rank 0, before the collective that ends iteration done - 1: whether a checkpoint
  // follows it (due, or asked for at the console).
  auto checkpoint_wanted = [&](int64_t done, bool asked) {
    return asked || (checkpoints.enabled() && checkpoints.due(done, train_ms));
  };
  // At the boundary after `done` iterations, when the control tail says so: rank 0
  // writes, every rank waits for it (another rank with a fault "during checkpoint"
  // dies meanwhile). The wait's deadline allows 50 MB/s for the write on top of
  // collective_timeout_s: a big model on a slow disk is not a dead worker.
  auto checkpoint_boundary = [&](int64_t done, const Plan& in_force, const float* control) {
    if (control[ControlTail::kCheckpoint] < 0.5f) return;
    console_checkpoint = false;
    if (rank == 0)
      write_checkpoint_now(done, in_force);
    else
      faults.at(done - 1, "checkpoint");
    const double timeout = comm.timeout_s();
    comm.set_timeout_s(timeout + static_cast<double>(checkpoints.bytes()) / 50e6);
    // An arrival rather than a plain barrier: past the deadline it names who is missing.
    float arrived = 1.0f;
    double waited_ms = 0.0;
    comm.arrive_and_allreduce(&arrived, 1, &waited_ms, "waiting for rank 0 to write a checkpoint");
    comm.set_timeout_s(timeout);
    anchor = now_ms();  // writing a checkpoint is not training time
  };
  summary.stop_reason = "epochs";
  int64_t t = first_iteration;
  std::vector<WorkerStats> console_reports(static_cast<size_t>(world));  // the last recorded, for the console
  std::deque<HistoryRow> history;
  std::deque<ConsoleEvent> console_events;
  auto remember = [&](int64_t iteration, const std::string& sync) {
    console_reports = reports;
    HistoryRow h;
    h.iteration = iteration;
    h.wall_s = wall.elapsed_ms() / 1000.0;
    h.sync = sync;
    int64_t samples = 0;
    for (const WorkerStats& w : reports) {
      h.step_ms = std::max(h.step_ms, w.step_ms);
      h.loss += w.loss_sum;
      samples += w.local_batch;
      h.local_batch.push_back(w.local_batch);
    }
    h.loss /= static_cast<double>(std::max<int64_t>(samples, 1));
    history.push_back(std::move(h));
    if (history.size() > 1000) history.pop_front();
  };
  // Rank 0 records iteration t-1, with the policy's decision on it, during t.
  auto record = [&](int64_t iteration) {
    if (recorder && reports[0].valid)
      recorder->iteration(iteration, schedule.at(iteration), reports, wall.elapsed_ms() / 1000.0,
                          policy ? &decision : nullptr);
    if (console && reports[0].valid) remember(iteration, "");
  };
  // The console (rank 0): what it reads, what it asks; asked slowdowns go out one
  // per iteration.
  auto view = [&](bool paused) {
    ConsoleView v;
    v.iteration = t;
    v.total = total;
    v.global_batch = cfg.global_batch;
    v.workers = world;
    v.wall_s = wall.elapsed_ms() / 1000.0;
    v.test_accuracy = summary.test_accuracy > 0 ? summary.test_accuracy : -1.0;
    v.plan = &plan;
    v.reports = &console_reports;
    v.history = &history;
    v.paused = paused;
    return v;
  };
  auto write_console = [&](float* control, const ConsoleRequests& rq) {
    if (rq.pause) control[ControlTail::kPause] = 1.0f;
    if (rq.stop) control[ControlTail::kStop] = 1.0f;
    for (const ConsoleEvent& e : rq.events) console_events.push_back(e);
    if (!console_events.empty()) {
      const ConsoleEvent e = console_events.front();
      console_events.pop_front();
      control[ControlTail::kEmuWorker] = static_cast<float>(e.worker + 1);
      control[ControlTail::kEmuSpeed] = static_cast<float>(e.speed);
      control[ControlTail::kEmuIterations] = static_cast<float>(e.iterations);
    }
  };
  // Every rank: the console's requests as they came in the control tail (they apply
  // from the next iteration), then a pause, if asked: rank 0 serves the console
  // until resume() or stop(), the others wait for its word (no deadline: a paused
  // run may sit for hours). Returns true to stop.
  // A checkpoint() asked while paused sets the tail's checkpoint flag on every rank:
  // the boundary after the pause writes it.
  auto apply_console = [&](float* control) {
    if (control[ControlTail::kEmuWorker] > 0.5f) {
      SlowdownEvent e;
      e.worker = static_cast<int>(std::lround(control[ControlTail::kEmuWorker])) - 1;
      e.speed = control[ControlTail::kEmuSpeed];
      e.from = t + 1;
      const auto n = static_cast<int64_t>(std::llround(control[ControlTail::kEmuIterations]));
      e.to = n > 0 ? t + 1 + n : std::numeric_limits<int64_t>::max();
      emulator.add_event(e);
      if (rank == 0)
        spdlog::info("console: worker {} at {}x speed from iteration {}{}", e.worker, e.speed, e.from,
                     n > 0 ? fmt::format(" for {} iterations", n) : std::string());
    }
    if (control[ControlTail::kPause] < 0.5f) return false;
    float word[2] = {0.0f, 0.0f};
    if (rank == 0) {
      spdlog::info("console: paused after iteration {}", t + 1);
      ConsoleRequests rq;
      console->serve_paused(view(true), rq);
      word[0] = rq.stop ? 1.0f : 0.0f;
      word[1] = rq.checkpoint ? 1.0f : 0.0f;
      spdlog::info("console: {}", rq.stop ? "stopping" : "resumed");
    }
    const double timeout = comm.timeout_s();
    comm.set_timeout_s(1e9);
    comm.broadcast(word, sizeof word, "waiting for the console to resume the run");
    comm.set_timeout_s(timeout);
    anchor = now_ms();  // a pause is not training time
    if (word[1] > 0.5f) {
      control[ControlTail::kCheckpoint] = 1.0f;
      console_checkpoint = true;  // written at the boundary, or at the end if the run stops here
    }
    return word[0] > 0.5f;
  };
  bool console_stopped = false;
  for (; t < total; ++t) {
    ConsoleRequests asked;  // rank 0: the console's commands at this boundary
    if (console && rank == 0) {
      console->serve(view(false), asked);
      console_stopped = console_stopped || asked.stop;
    }
    if (next_plan) {
      plan = std::move(*next_plan);
      next_plan.reset();
    } else if (cfg.plan.kind == "random" && !policy_on) {
      plan = Plan::random(world, cfg.global_batch, mix_seed(cfg.seed ^ 0x706c616eULL, t));
    }
    if (plan.sync.mode != SyncMode::bsp && world > 1) {
      // A relaxed-sync segment (sync/relaxed_segment.hpp), up to the next evaluation or the end.
      // The last bsp iteration's stats are recorded first; its decision was taken.
      comm.finish_reports("the stats reports");
      if (rank == 0) {
        decision = PolicyReport{};
        record(t - 1);
      }
      const double seg_start = now_ms();
      const int64_t to_eval = eval_every - t % eval_every;
      const SegmentResult seg = segments.run(plan, t, std::min(total - t, to_eval), anchor, origin, &version);
      const int64_t done = t + seg.iterations;
      mine = seg.stats;
      label(mine);
      mine.rank = rank;
      mine.valid = 1;
      mine.iteration = done - 1;
      mine.sync_mode = static_cast<int32_t>(plan.sync.mode);
      mine.memory_mb = static_cast<double>(dev.bytes_in_use()) / (1024.0 * 1024.0);
      comm.post_report(&mine, sizeof mine, reports.data());
      comm.finish_reports("the segment's stats");
      train_ms += seg.end_ms - seg_start;
      samples_done += seg.iterations * cfg.global_batch;
      skipped_steps += seg.skipped + seg.server.nonfinite;
      // Rank 0: the trace line, the policy's decision (taken now: the next segment
      // runs it), the stop decision; all of it broadcast in the control tail's layout.
      std::vector<float> control(ControlTail::size(world), 0.0f);
      if (rank == 0) {
        SyncRecord rec;
        rec.mode = plan.sync.str();
        rec.groups = plan.sync.group;
        rec.iterations = seg.iterations;
        rec.updates = seg.server.updates;
        rec.applied = seg.server.applied;
        rec.dropped = seg.server.dropped;
        rec.staleness_mean = seg.server.applied ? seg.server.staleness_sum / static_cast<double>(seg.server.applied) : 0.0;
        rec.staleness_max = seg.server.staleness_max;
        rec.server_busy_ms = seg.server.busy_ms;
        rec.staleness_histogram = seg.server.staleness_histogram;
        if (plan.sync.mode == SyncMode::local) rec.updates = 1;  // one model average
        rec.segment_ms = seg.end_ms - seg_start;
        decision = PolicyReport{};
        std::optional<Plan> decided;
        if (policy) {
          ClusterStats cs;
          cs.sync_mode = static_cast<int32_t>(plan.sync.mode);
          cs.iterations = static_cast<double>(seg.iterations);
          cs.updates = seg.server.updates;
          cs.dropped = seg.server.dropped;
          cs.server_busy_ms = seg.server.busy_ms;
          policy->submit(done - 1, reports, cs);
          decided = policy->collect(decision);
          decision.applies_from = done;
        }
        recorder->iteration(done - 1, schedule.at(done - 1), reports, wall.elapsed_ms() / 1000.0,
                            policy ? &decision : nullptr, &rec);
        if (console) remember(done - 1, rec.mode);
        control[ControlTail::kStop] =
            g_interrupted || (cfg.stop.max_seconds && train_ms / 1000.0 >= *cfg.stop.max_seconds) ? 1.0f : 0.0f;
        if (decided) ControlTail::write_plan(control.data(), *decided, world);
        write_console(control.data(), asked);
        if (checkpoint_wanted(done, asked.checkpoint)) control[ControlTail::kCheckpoint] = 1.0f;
      }
      for (WorkerStats& r : reports) r.valid = 0;  // recorded: the bsp path must not again
      comm.broadcast(control.data(), control.size() * sizeof(float), "the meeting's decisions");
      if (control[ControlTail::kHasPlan] > 0.5f) {
        plan = ControlTail::read_plan(control.data(), world);
        plan.validate(world, cfg.global_batch);
      }
      anchor = now_ms();
      t = done - 1;  // the loop's ++t makes it done
      const bool console_stop = apply_console(control.data());
      if ((done % eval_every == 0 || done >= total) && evaluate_now(done)) {
        ++t;
        break;
      }
      const bool stopping = control[ControlTail::kStop] > 0.5f || console_stop;
      if (!stopping && done < total) checkpoint_boundary(done, plan, control.data());
      if (stopping) {
        summary.stop_reason = g_interrupted ? "interrupted" : console_stopped || console_stop ? "console" : "max_seconds";
        ++t;
        break;
      }
      continue;
    }
    const int64_t my_batch = plan.local_batch[static_cast<size_t>(rank)], my_offset = plan.offset(rank);
    const double start = now_ms();
    WorkerStats now{};
    label(now);
    now.rank = rank;
    now.valid = 1;
    now.iteration = t;
    now.local_batch = my_batch;
    now.start_ms = start - origin;

    const Tensor& x = loader.load(t, my_offset, my_batch);
    now.data_ms = now_ms() - start;

    // Every rank's stats of t-1 were posted at the end of t-1. If they are all in,
    // rank 0 hands them to the policy now, which then decides while this iteration
    // computes; if a rank is still on its way (sharing a core, say), rank 0 does not
    // wait for it here but after its own compute.
    now.stats_ms = post_ms;
    bool submitted = false;  // whether the policy was asked for a decision on t-1
    auto finish_reports_and_submit = [&] {
      const double stats_start = now_ms();
      comm.finish_reports("the stats reports");
      now.stats_ms += now_ms() - stats_start;
      if (policy && reports[0].valid) {
        policy->submit(t - 1, reports, last_cluster);
        submitted = true;
      }
    };
    const bool reports_in = comm.reports_ready();
    if (reports_in) finish_reports_and_submit();

    StepContext ctx;
    ctx.reducer = world > 1 ? &reducer : nullptr;
    ctx.seed = mix_seed(cfg.seed, static_cast<uint64_t>(t));
    ctx.first_sample = my_offset;
    const double compute_start = now_ms();
    // Batch norm's running statistics move in the forward pass; a step skipped for a
    // NaN must not leave them poisoned, so they are kept to go back to.
    if (has_layer_state) layer_state_before = model.layer_state();
    const LossResult loss = step.compute(x, loader.labels(), ctx);
    if (faults.nan_at(t)) dev.fill(model.grads().data(), 1, std::numeric_limits<float>::quiet_NaN());
    faults.at(t, "compute");
    now.real_compute_ms = now_ms() - compute_start;
    // Whether this rank's loss and gradient are finite (its squared norm: one pass,
    // which the policy's gradient-noise estimate wants anyway: the mean gradient's).
    const double my_grad_sq = dev.sum_squares(model.grads().data(), model.param_count());
    const bool my_nonfinite = !std::isfinite(loss.loss_sum) || !std::isfinite(my_grad_sq);
    if (policy_on && my_batch > 0 && !my_nonfinite)
      now.grad_sq = my_grad_sq / static_cast<double>(my_batch * my_batch);

    // While the device (here: the emulated one) would still be computing, rank 0
    // does its bookkeeping, off the collectives' path: it takes the policy's
    // decision on t-1 (to send with this iteration's gradients) and records t-1.
    if (!reports_in) finish_reports_and_submit();
    std::optional<Plan> decided;
    if (rank == 0) {
      decision = PolicyReport{};
      if (policy && submitted) {
        decided = policy->collect(decision);
        decision.applies_from = t + 1;
      }
      record(t - 1);
    }
    if (cfg.emulation.enabled) {
      const Stretch s = emulator.stretch(rank, t, my_batch, profile_ms(machine, static_cast<double>(my_batch)));
      if (s.clamped && !warned_clamp) {
        spdlog::warn("rank {} is emulated faster than this machine computes ({:.2f} ms for {} samples); it runs at "
                     "real speed (lower emulation.reference to avoid this)", rank, s.target_ms, my_batch);
        warned_clamp = true;
      }
      // The emulated worker's step starts at the anchor, where every rank left the
      // last collective: its host part (loading, the optimizer step) takes what it
      // takes on an idle core (calibrated), then its device computes for the target
      // time. Ranks sharing cores get to their real work in turn, and that wait must
      // not show as a slower worker: counting from the anchor absorbs it, so all
      // ranks arrive when their emulated devices would.
      const double device_start = anchor + host_profile_ms(machine, static_cast<double>(my_batch)), deadline = device_start + s.target_ms;
      if (now_ms() > deadline) ++overruns;
      sleep_until_ms(deadline);
      now.speed = emulator.speed(rank, t);
      // The emulated device's time, unless the real compute outlasted it.
      now.compute_ms = std::max(s.target_ms, now.real_compute_ms);
    } else {
      now.compute_ms = now.real_compute_ms;
    }
    now.loss_sum = loss.loss_sum;
    now.correct = loss.correct;
    now.samples_per_s = now.compute_ms > 0 ? static_cast<double>(my_batch) / (now.compute_ms / 1000.0) : 0.0;
    now.memory_mb = static_cast<double>(dev.bytes_in_use()) / (1024.0 * 1024.0);

    // Synchronisation: every rank waits for the slowest to arrive (idle), then the
    // gradients are summed (comm), with rank 0's stop decision and the policy's
    // plan riding in the buffer's tail. An emulated slow link holds every rank: a
    // collective is as slow as its slowest link.
    const double sync_start = now_ms();
    const bool stop_here =
        rank == 0 && (g_interrupted || (cfg.stop.max_seconds && train_ms / 1000.0 >= *cfg.stop.max_seconds));
    float* tail = gradients.tail();
    std::fill(tail, tail + ControlTail::size(world), 0.0f);
    if (rank == 0) {
      tail[ControlTail::kStop] = stop_here ? 1.0f : 0.0f;
      if (decided) ControlTail::write_plan(tail, *decided, world);
      write_console(tail, asked);
      if (checkpoint_wanted(t + 1, asked.checkpoint)) tail[ControlTail::kCheckpoint] = 1.0f;
    }
    tail[ControlTail::nonfinite(world, rank)] = my_nonfinite ? 1.0f : 0.0f;
    faults.at(t, "allreduce");
    if (world > 1) {
      gradients.run(&now.idle_ms, "the gradient all-reduce");
      if (link_delay_ms > 0) sleep_until_ms(now_ms() + link_delay_ms);
      now.comm_ms = now_ms() - sync_start - now.idle_ms;
      anchor = comm.last_sync_end_ms() + link_delay_ms;
    } else {
      anchor = now_ms();
    }
    stop_after = tail[ControlTail::kStop] > 0.5f;
    // A NaN or Inf on any rank: every rank sees the same flags and skips the update.
    std::string nonfinite_ranks;
    for (int r = 0; r < world; ++r)
      if (tail[ControlTail::nonfinite(world, r)] > 0.5f)
        nonfinite_ranks += (nonfinite_ranks.empty() ? "" : ", ") + std::to_string(r);
    const bool skip_step = !nonfinite_ranks.empty();
    if (!skip_step) nonfinite.finite();
    if (skip_step) {
      ++skipped_steps;
      const bool stop = nonfinite.skipped();
      if (rank == 0)
        spdlog::warn("iteration {}: the loss or gradient of rank(s) {} is not finite (NaN or Inf): every rank skips "
                     "this step ({})", t, nonfinite_ranks, nonfinite.progress());
      if (stop)
        TANDEM_FAIL_HINT("lower the learning rate (lr=...), add warm-up (schedule.warmup_iterations=...), or check "
                         "the data; resume from the last checkpoint with tandem run --resume RUN_DIR",
                         nonfinite.diverged("steps", fmt::format("loss or gradient, the last from rank(s) {} at "
                                                                 "iteration {}", nonfinite_ranks, t)));
    }
    if (rank == 0 && policy_on && !skip_step) {  // the global mean gradient, for the next submit
      last_cluster = ClusterStats{};
      last_cluster.global_grad_sq = dev.sum_squares(model.grads().data(), model.param_count()) /
                                    static_cast<double>(cfg.global_batch * cfg.global_batch);
    }
    if (tail[ControlTail::kHasPlan] > 0.5f) {
      next_plan = ControlTail::read_plan(tail, world);
      next_plan->validate(world, cfg.global_batch);
    }
    const double opt_start = now_ms();
    if (skip_step && has_layer_state) model.load_layer_state(layer_state_before);
    if (!skip_step) {
      ++version;
      step.update(cfg.global_batch, schedule.at(t));
    }
    now.optimizer_ms = now_ms() - opt_start;
    // A GPU runs the update it was just given while the host gathers the next batch
    // and the copy engine uploads it (on the CPU this does nothing).
    if (t + 1 < total) {
      const Plan& upcoming = next_plan ? *next_plan : plan;
      if (cfg.plan.kind != "random" || policy_on || next_plan)
        loader.prefetch(t + 1, upcoming.offset(rank), upcoming.local_batch[static_cast<size_t>(rank)]);
    }
    now.step_ms = now_ms() - start;
    // This iteration's stats leave for rank 0 now (no wait), to be there by its
    // next compute. `mine` stays untouched until that send completes.
    mine = now;
    const double post_start = now_ms();
    comm.post_report(&mine, sizeof mine, reports.data());
    post_ms = now_ms() - post_start;
    if (apply_console(tail)) stop_after = console_stopped = true;

    train_ms += now.step_ms;
    if (!skip_step) samples_done += cfg.global_batch;

    const bool last = t + 1 == total;
    if (((t + 1) % eval_every == 0 || last) && evaluate_now(t + 1)) {
      ++t;
      break;
    }
    // (A run that stops here gets its final checkpoint after the loop.)
    if (!stop_after && !last) checkpoint_boundary(t + 1, next_plan ? *next_plan : plan, tail);
    if (stop_after) {
      summary.stop_reason = g_interrupted ? "interrupted" : console_stopped ? "console" : "max_seconds";
      if (rank == 0 && g_interrupted) spdlog::warn("interrupted: stopping after iteration {}", t + 1);
      ++t;
      break;
    }
  }
  overruns += segments.overruns();
  if (overruns > t / 20)
    spdlog::warn("rank {}: {} of {} steps computed longer than their emulated time (the cores are oversubscribed); "
                 "lower emulation.reference or use fewer workers for a faithful emulation", rank, overruns, t);
  // The last iteration's stats.
  comm.finish_reports("the final stats reports");
  decision = PolicyReport{};  // the last iteration's stats were decided on by no one
  record(t - 1);
  for (WorkerStats& r : reports) r.valid = 0;  // recorded: nothing pending for a resumed run
  if (rank == 0 && ((checkpoints.enabled() && cfg.checkpoint.final) || console_checkpoint) &&
      checkpoints.last_iteration() != t)
    write_checkpoint_now(t, next_plan ? *next_plan : plan);
  summary.skipped_steps = skipped_steps;

  // (>=: a relaxed-sync segment's in-flight updates may carry it a little past.)
  if (summary.stop_reason == "epochs" && cfg.stop.max_iterations && t >= *cfg.stop.max_iterations &&
      t < static_cast<int64_t>(std::ceil(cfg.stop.epochs * static_cast<double>(per_epoch))))
    summary.stop_reason = "max_iterations";
  summary.iterations = t;
  summary.epochs = static_cast<double>(t) / static_cast<double>(per_epoch);
  summary.train_s = train_ms / 1000.0;
  summary.samples_per_s = train_ms > 0 ? static_cast<double>(samples_done) / summary.train_s : 0.0;
  summary.wall_s = wall.elapsed_ms() / 1000.0;
  if (recorder) {
    if (cfg.save_params) {
      const std::vector<float> params = model.params().to_host();
      write_binary_file(summary.run_dir + "/params.f32", params.data(), params.size() * sizeof(float));
    }
    recorder->finish(summary, cfg);
    if (console)
      console->finished(fmt::format("run finished ({}) after {} iterations, test accuracy {:.4f}", summary.stop_reason,
                                    summary.iterations, summary.test_accuracy));
    spdlog::info("done ({}): {} iterations, test accuracy {:.4f}, {:.0f} samples/s, {:.1f} s{}", summary.stop_reason,
                 summary.iterations, summary.test_accuracy, summary.samples_per_s, summary.wall_s,
                 summary.time_to_target_s ? fmt::format(", target reached after {:.1f} s of training",
                                                        *summary.time_to_target_s)
                                          : std::string());
  }
  return summary;
}

}  // namespace tandem
