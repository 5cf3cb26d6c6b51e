#include "engine/train/trainer.hpp"

#include "engine/train/checkpoint/init_from.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include <unistd.h>

#include "engine/core/host_name.hpp"
#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/batch_positions.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/boundary.hpp"
#include "engine/train/checkpoint/run_checkpoints.hpp"
#include "engine/train/emulation/calibration.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/emulation/faults.hpp"
#include "engine/train/interrupt.hpp"
#include "engine/train/plan.hpp"
#include "engine/train/progress.hpp"
#include "engine/train/run_length.hpp"
#include "engine/train/record/progress_line.hpp"
#include "engine/train/record/run_dir.hpp"
#include "engine/train/step.hpp"
#include "engine/train/sync/bsp_step.hpp"
#include "engine/train/sync/gradient_sync.hpp"
#include "engine/train/sync/relaxed_segment.hpp"

namespace tandem {

namespace {

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

// Batch-norm statistics summed over every rank's share of the global batch.
class CommReducer final : public BatchReducer {
public:
  explicit CommReducer(Comm& comm) : comm_(comm) {}
  void sum(double* data, size_t count) override { comm_.allreduce_sum(data, count, "the batch-norm statistics"); }

private:
  Comm& comm_;
};

// ", in bf16 (GEMM inputs rounded as a GPU's tensor cores round them)": what the GEMMs
// compute in, when it is not float32 (engine/core/precision.hpp).
std::string precision_text(const std::string& precision, DeviceKind kind) {
  if (precision == "fp32") return "";
  if (kind == DeviceKind::cpu)
    return fmt::format(", in {} (GEMM inputs rounded as a GPU's tensor cores round them: the numerics, not the speed)",
                       precision);
  return fmt::format(", in {} on tensor cores", precision);
}

// "1 worker on this machine", "4 workers over MPI (shared memory)": how the workers
// reach each other. MPI sums gradients through shared memory when every rank is on
// one host (engine/dist/mpi_comm.cpp, unless TANDEM_SHM_ALLREDUCE=0); the launcher's
// environment says how many ranks share this host.
std::string workers_text(int world, const std::string& comm) {
  if (world == 1) return "1 worker on this machine";
  if (comm == "nccl") return fmt::format("{} workers over NCCL", world);
  if (comm != "mpi") return fmt::format("{} workers over {}", world, comm);
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char* shm = std::getenv("TANDEM_SHM_ALLREDUCE");
  if (!local) return fmt::format("{} workers over MPI", world);
  if (std::atoi(local) != world) return fmt::format("{} workers over MPI (several hosts)", world);
  return fmt::format("{} workers over MPI ({})", world,
                     shm && std::string(shm) == "0" ? "MPI messages, TANDEM_SHM_ALLREDUCE=0" : "shared memory");
}


// One worker's run: the parts it trains with, built in an order every rank keeps
// (several steps are collectives), and the loop over them.
class Trainer {
public:
  Trainer(const ExperimentConfig& cfg, Comm& comm, const DeviceChoice& device, PlanPolicy* policy,
          const ConsoleFactory& make_console);
  RunSummary run();

private:
  void load_data();
  void build_model();
  void open_run();
  void resume();
  void restore_policy(const CheckpointState& s, bool same_cluster);
  void start_recording();
  void start_loop();
  bool relaxed() const { return plan_.sync.mode != SyncMode::bsp && world_ > 1; }
  StepResult segment(int64_t t);
  void warn_overruns(int64_t done) const;

  const ExperimentConfig& cfg_;
  Comm& comm_;
  const DeviceChoice& device_;
  Device& dev_;
  PlanPolicy* policy_;
  ConsoleFactory make_console_;
  const Stopwatch wall_;
  InterruptGuard interrupt_guard_;
  const int rank_, world_;
  // A new random split every iteration (plan.kind = 'random' without a policy): the
  // next plan is not known until its iteration starts.
  const bool random_plans_;

  std::unique_ptr<Dataset> train_set_, test_set_;
  std::unique_ptr<GlobalSampler> sampler_;
  std::unique_ptr<BatchPositions> positions_;  // where each iteration's global batch lies
  int64_t per_epoch_ = 0;  // global batches of B0 in an epoch
  RunLength length_;       // its max_iterations: the loop's bound
  std::vector<double> noise_state_;  // a resumed run's noise-scale estimate (rank 0)
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<CommReducer> reducer_;
  std::unique_ptr<GradientSync> gradients_;
  std::unique_ptr<BatchLoader> loader_;
  std::unique_ptr<Emulator> emulator_;
  DeviceProfile machine_;  // this machine's calibration (emulation only)
  Plan plan_;              // the plan of the next iteration

  RunSummary summary_;
  std::unique_ptr<Checkpointer> checkpoints_;
  std::unique_ptr<FaultInjector> faults_;
  int64_t first_ = 0;      // the first iteration (a resumed run: the checkpoint's)
  std::string pending_;    // a resumed run's pending stats (rank 0, same cluster)
  ClusterStats cluster_;   // ... and the cluster stats that go with them
  Progress progress_;
  Timeline timeline_;
  std::unique_ptr<RunRecorder> recorder_;
  std::unique_ptr<Console> console_;
  std::unique_ptr<SegmentRunner> segments_;
  std::unique_ptr<Boundary> boundary_;
  std::unique_ptr<BspStep> bsp_;
};

Trainer::Trainer(const ExperimentConfig& cfg, Comm& comm, const DeviceChoice& device, PlanPolicy* policy,
                 const ConsoleFactory& make_console)
    : cfg_(cfg), comm_(comm), device_(device), dev_(*device.device), policy_(policy), make_console_(make_console),
      rank_(comm.rank()), world_(comm.size()),
      random_plans_(cfg.plan.kind == "random" && cfg.policy.file.empty()) {
  comm_.set_timeout_s(cfg_.collective_timeout_s);
  dev_.set_blas_threads(cfg_.blas_threads);
  TANDEM_CHECK(cfg_.policy.file.empty() || rank_ != 0 || policy_ != nullptr,
               "rank 0 was started without the experiment's policy ", cfg_.policy.file,
               " (a bug in tandem's start-up)");
  load_data();
  build_model();
  open_run();
  if (cfg_.resume) resume();
  if (rank_ == 0) start_recording();
  if (rank_ == 0 && make_console_) console_ = make_console_(summary_.run_dir);
  if (console_) log::info("console: tandem attach {}", summary_.run_dir);
}

void Trainer::load_data() {
  train_set_ = make_dataset(cfg_.data, /*train=*/true);
  test_set_ = make_dataset(cfg_.data, /*train=*/false);
  TANDEM_CHECK_HINT(train_set_->sample_shape() == cfg_.model.input && train_set_->classes() == cfg_.model.classes,
                    "the model must be built for the data set's input shape and classes", "model input ",
                    shape_str(cfg_.model.input), " with ", cfg_.model.classes, " classes does not match data set '",
                    train_set_->name(), "' (", shape_str(train_set_->sample_shape()), ", ", train_set_->classes(),
                    " classes)");
  sampler_ = std::make_unique<GlobalSampler>(train_set_->size(), cfg_.global_batch, cfg_.seed);
  per_epoch_ = sampler_->iterations_per_epoch();
  length_ = run_length(cfg_, per_epoch_);
}

void Trainer::build_model() {
  // The same seed on every rank: identical initial weights.
  model_ = std::make_unique<Model>(dev_, cfg_.model, cfg_.seed);
  // Fine-tuning starts from a file's weights; a resumed run from its checkpoint's.
  if (!cfg_.init_from.empty() && !cfg_.resume)
    init_from_safetensors(cfg_.init_from, cfg_.init_from_strict, cfg_.model, *model_);
  TANDEM_CHECK_HINT(model_->targets_per_sample() == train_set_->targets_per_sample(),
                    "a sequence data set (data.name = 'text' or 'tokens') needs a model that predicts every position "
                    "(model = 'gpt'), and a classifier's data one label per sample",
                    "model '", cfg_.model.name, "' makes ", model_->targets_per_sample(),
                    " prediction(s) per sample but data set '", train_set_->name(), "' has ",
                    train_set_->targets_per_sample(), " label(s) per sample");
  // Batch norm's statistics are a micro-batch's under accumulation: neither one
  // worker's batch (the guarantee of any split) nor a fixed number of collectives.
  TANDEM_CHECK_HINT(cfg_.accumulate == 1 || model_->layer_state().empty(),
                    "set accumulate = 1, or use a model without batch norm (model_args.batchnorm=false where it "
                    "has one)", "accumulate = ", cfg_.accumulate, " cannot keep batch norm exact in model '",
                    cfg_.model.name, "': its statistics would be each micro-batch's");
  const bool micro = std::any_of(cfg_.plan.micro_batches.begin(), cfg_.plan.micro_batches.end(),
                                 [](int64_t k) { return k > 1; });
  TANDEM_CHECK_HINT(!micro || model_->layer_state().empty(),
                    "leave plan.micro_batches out, or use a model without batch norm",
                    "plan.micro_batches cannot keep batch norm exact in model '", cfg_.model.name,
                    "': its statistics would be each micro-batch's");
  optimizer_ = make_optimizer(dev_, *model_, cfg_.optimizer);
  schedule_ = std::make_unique<LrSchedule>(cfg_.schedule, cfg_.optimizer.lr, per_epoch_, length_.schedule_iterations);
  step_ = std::make_unique<TrainStep>(*model_, *optimizer_, cfg_.accumulate);
  reducer_ = std::make_unique<CommReducer>(comm_);
  gradients_ = std::make_unique<GradientSync>(*model_, comm_, cfg_.comm.bucket_mb,
                                              cfg_.comm.dtype == "bf16" ? Wire::bf16 : Wire::fp32,
                                              cfg_.collective_timeout_s);
  loader_ = std::make_unique<BatchLoader>(*train_set_, *sampler_, dev_, cfg_.data.on_device);
  emulator_ = std::make_unique<Emulator>(cfg_.emulation, world_);
  // Emulated compute times stretch this machine's calibrated compute time (see
  // calibration.hpp); rank 0 measures it alone and every rank uses its numbers.
  if (cfg_.emulation.enabled)
    machine_ = cfg_.emulation.calibration
                   ? *cfg_.emulation.calibration
                   : shared_calibration(*step_, *loader_, cfg_.global_batch_max(), *model_, cfg_.optimizer, comm_);
  plan_ = Plan::initial(cfg_, world_, [&](const std::vector<int64_t>& local_batch) {
    return emulator_->throughput(local_batch, machine_);
  });
}

void Trainer::open_run() {
  summary_.workers = world_;
  summary_.parameters = static_cast<int64_t>(model_->param_count());
  // The run directory is made only once data and model have loaded, so a mistake
  // there leaves no empty run behind.
  summary_.run_dir = shared_run_dir(cfg_, comm_);
  if (rank_ == 0) log::add_file(summary_.run_dir + "/log.txt");  // before resuming: its messages belong there
  checkpoints_ = std::make_unique<Checkpointer>(cfg_.checkpoint, summary_.run_dir, *model_, *optimizer_);
  // Injected faults happen once: a resumed run goes on past them.
  faults_ = std::make_unique<FaultInjector>(cfg_.resume ? std::vector<FaultConfig>{} : cfg_.faults, rank_);
}

// The training state a resumed run starts from (checkpoint/run_checkpoints.hpp).
void Trainer::resume() {
  const CheckpointState s = resume_from(summary_.run_dir, *model_, *optimizer_, comm_);
  checkpoints_->resumed_at(s.iteration, s.train_ms);
  first_ = s.iteration;
  progress_.version = s.version;
  progress_.samples = s.samples;
  progress_.train_ms = s.train_ms;
  progress_.skipped_steps = s.skipped_steps;
  // A file from before adaptive batches: B was fixed, the sampler's own mapping.
  progress_.samples_drawn = s.samples_drawn >= 0 ? s.samples_drawn : s.iteration * cfg_.global_batch;
  progress_.sample_cursor = s.sample_cursor >= 0 ? s.sample_cursor : sampler_->start_of(s.iteration);
  progress_.noise_scale = s.noise_scale;
  noise_state_ = s.noise_state;
  // The file keeps 0 for "not evaluated yet" (an evaluated accuracy of exactly 0 reads so too).
  if (s.best_test_accuracy > 0) {
    summary_.test_accuracy = s.test_accuracy;
    summary_.best_test_accuracy = s.best_test_accuracy;
  }
  summary_.time_to_target_s = s.time_to_target_s;
  // The same cluster continues with its plan; another one gets the experiment's
  // first plan for its size, and the policy decides from there.
  bool same_cluster = s.world == world_;
  if (same_cluster) {
    try {
      const int64_t b = s.plan.global_batch();
      TANDEM_CHECK(b >= cfg_.global_batch_min() && b <= cfg_.global_batch_max(), "outside the global batches");
      s.plan.validate(world_, b);
    } catch (const std::exception&) {
      same_cluster = false;  // the global batch (or its range) was changed on resume
    }
  }
  if (same_cluster) plan_ = s.plan;
  if (same_cluster && rank_ == 0) pending_ = usable_pending_stats(s, world_);
  if (same_cluster && rank_ == 0 && s.cluster_stats.size() == sizeof(ClusterStats))
    std::memcpy(&cluster_, s.cluster_stats.data(), sizeof cluster_);
  if (rank_ == 0 && !same_cluster)
    log::info("resumed on {} (the checkpoint's run had {}): the plan starts again from {} ({}){}", log::counted(world_, "worker"),
                 s.world, plan_.str(), cfg_.plan.kind,
                 cfg_.policy.file.empty() ? "" : "; the policy re-decides it for this cluster");
  if (rank_ == 0 && policy_ && !s.policy.empty()) restore_policy(s, same_cluster);
}

void Trainer::restore_policy(const CheckpointState& s, bool same_cluster) {
  if (!same_cluster) {
    log::info("policy {} starts fresh: its saved state was for {} workers", policy_->name(), s.world);
  } else if (s.policy != policy_->name()) {
    log::info("policy {} starts fresh: the saved state is {}'s", policy_->name(), s.policy);
  } else {
    const bool history = s.policy_window.empty() || policy_->restore_window(s.policy_window, plan_.sync);
    const bool state = s.policy_state.empty() || policy_->restore_state(s.policy_state);
    log::info("policy {}: {} restored from the checkpoint", s.policy,
                 history && state ? "its state and stats history" : "not all of its state (see above) was");
  }
}

void Trainer::start_recording() {
  const std::string& dir = summary_.run_dir;
  checkpoints_->check_disk();
  write_text_file(dir + "/config.json", cfg_.resolved_json.empty() ? "{}\n" : cfg_.resolved_json + "\n");
  log::info("run directory {}", dir);
  log::info("{}", model_->summary());
  log::info("data {}: {} train / {} test samples; global batch {}, {} iterations per epoch; {}",
               train_set_->name(), train_set_->size(), test_set_->size(), cfg_.global_batch, per_epoch_,
               stop_text(cfg_.stop, length_.max_iterations, per_epoch_));
  log::info("{}; plan {} ({})", workers_text(world_, comm_.name()),
               cfg_.plan.kind == "random" ? "changing every iteration" : plan_.str(), cfg_.plan.kind);
  log::info("rank 0 computes on {}{}{}", device_.note.empty() ? dev_.name() : "the CPU: " + device_.note,
               precision_text(cfg_.device.precision, dev_.kind()),
               world_ > 1 ? fmt::format("; gradients are summed in {}", gradients_->path()) : "");
  // On the CPU the data set is always in the device's memory: only a GPU's way is news.
  log::at(dev_.kind() == DeviceKind::cpu ? log::Level::debug : log::Level::info,
              "training batches: {} (data.on_device = '{}')", loader_->input().describe(), cfg_.data.on_device);
  if (world_ > 1 && cfg_.comm.dtype == "bf16" && !gradients_->bf16_wire())
    log::warn("comm.dtype = 'bf16' applies to gradients crossing between hosts over MPI; these ranks sum them in "
              "{}, in fp32", gradients_->path());
  log::debug("the gradient all-reduce: {} floats ({:.2f} MB) a step over {} in {}", gradients_->floats(),
                static_cast<double>(gradients_->floats()) * sizeof(float) / (1 << 20), comm_.name(),
                gradients_->path());
  if (cfg_.emulation.enabled) {
    log::info("emulated heterogeneity:\n{}", emulator_->describe());
    nlohmann::json cal{{"batch", machine_.batch}, {"ms", machine_.ms}, {"host_ms", machine_.host_ms}};
    write_text_file(dir + "/calibration.json", cal.dump() + "\n");
  }
  recorder_ = std::make_unique<RunRecorder>(cfg_, dir, world_, per_epoch_, length_.max_iterations,
                                            cfg_.resume ? first_ : -1, first_ - (pending_.empty() ? 0 : 1));
  recorder_->set_targets_per_sample(model_->targets_per_sample());
}

// The parts of the loop, and the start-up collective after which every rank's
// clock counts.
void Trainer::start_loop() {
  positions_ = std::make_unique<BatchPositions>(train_set_->size(), plan_.global_batch(), first_,
                                                progress_.sample_cursor, progress_.samples_drawn);
  loader_->use_positions(*positions_);
  comm_.prepare_allreduce(gradients_->floats());
  segments_ = std::make_unique<SegmentRunner>(cfg_, comm_, *model_, *optimizer_, *step_, *loader_, *emulator_, machine_,
                                              *schedule_);
  segments_->set_faults(faults_.get());
  summary_.stop_reason = "epochs";
  BoundaryParts parts{cfg_,        comm_,          *model_,    *test_set_, *schedule_, *checkpoints_, *faults_,
                      *emulator_,  policy_,        recorder_.get(), console_.get(), progress_, timeline_, summary_,
                      wall_,       per_epoch_,     length_.max_iterations};
  boundary_ = std::make_unique<Boundary>(parts, host_name(), dev_.name(), pending_, cluster_);
  boundary_->restore_noise_scale(noise_state_);
  BspParts bsp{cfg_,       comm_,      *model_,    *step_,  *loader_,  *positions_, *gradients_, world_ > 1 ? reducer_.get() : nullptr,
               *emulator_, machine_,   *schedule_, *faults_, progress_, timeline_,   length_.max_iterations};
  bsp_ = std::make_unique<BspStep>(bsp, !random_plans_);
  if (world_ == 1) {
    // Only a GPU's way is news: a CPU does not wait for itself.
    const auto level = dev_.kind() == DeviceKind::cpu ? log::Level::debug : log::Level::info;
    if (bsp_->fused())
      log::at(level, "training step: fused on the device{} (fused_step = '{}')",
                  step_->graphs() ? ", captured in a CUDA graph per input and replayed" : "", cfg_.fused_step);
    else
      log::at(level, "training step: op by op, not fused: {}", bsp_->fused_obstacle());
  }
  if (rank_ == 0 && plan_.sync.mode != SyncMode::bsp) log::info("sync mode {}", plan_.sync.str());
  if (rank_ == 0 && world_ == 1 && cfg_.plan.sync.mode != "bsp")
    log::info("one worker: sync.mode = '{}' is the same as bsp", cfg_.plan.sync.mode);
  double ready = 1.0;
  comm_.allreduce_sum(&ready, 1, "start-up");
  timeline_.start();
}

RunSummary Trainer::run() {
  start_loop();
  int64_t t = first_;
  // A model that starts from a file's weights is evaluated before its first step
  // (nanoGPT's step 0): the run records what it starts from. One at its target
  // already has nothing to train.
  if (!cfg_.init_from.empty() && !cfg_.resume && boundary_->evaluate(t)) return boundary_->finish(t, plan_);
  while (t < length_.max_iterations) {
    boundary_->open(t, plan_);  // rank 0: the console's commands since the last boundary
    if (random_plans_)
      plan_ = Plan::random(world_, cfg_.global_batch_min(), cfg_.global_batch_max(),
                           mix_seed(cfg_.seed ^ 0x706c616eULL, t));
    positions_->resize(t, plan_.global_batch());
    StepResult r = relaxed() ? segment(t) : bsp_->run(plan_, t, *boundary_);
    Control c = boundary_->exchange(r, plan_);
    t = r.done;
    // A fused step read one iteration late is read now if this boundary needs it.
    if (bsp_->unread() && !boundary_->quiet(c, t)) bsp_->settle(*boundary_);
    if (boundary_->apply(c, t, plan_)) break;
  }
  bsp_->settle(*boundary_);
  warn_overruns(t);
  if (bsp_->fused() || step_->compute_graphs_asked()) {
    const GraphCounts& g = step_->graph_counts();
    log::at(dev_.kind() == DeviceKind::cpu ? log::Level::debug : log::Level::info,
                "{}: {} replays of {} captured graphs, {} op by op; every graph dropped {} times as "
                "memory moved and {} times for too many inputs; {} captures failed",
                bsp_->fused() ? "fused steps" : "computes (forward, loss, backward)", g.replayed, g.captured,
                g.eager, g.invalidated, g.evicted, g.failed);
  }
  return boundary_->finish(t, plan_);
}

// A relaxed-sync segment (sync/relaxed_segment.hpp), up to the next evaluation or
// the end. The last bsp iteration's stats are recorded first (its decision was
// taken).
StepResult Trainer::segment(int64_t t) {
  boundary_->before_segment(t);
  const int64_t to_eval = boundary_->eval_every() - t % boundary_->eval_every();
  SegmentResult seg = segments_->run(plan_, t, std::min(length_.max_iterations - t, to_eval), timeline_.anchor(),
                                     timeline_.origin(), &progress_.version);
  progress_.train_ms += seg.segment_ms;
  const int64_t b = plan_.global_batch();  // the relaxed modes keep one B (the experiment's)
  progress_.samples += seg.iterations * b;
  if (seg.iterations > 0) {
    const BatchSpan last = positions_->at(t + seg.iterations - 1);
    progress_.samples_drawn = last.samples_before + last.size;
    progress_.sample_cursor = last.start + last.size;
  }
  progress_.skipped_steps += seg.skipped + seg.server.nonfinite;
  StepResult r;
  r.done = t + seg.iterations;
  r.segment = std::move(seg);
  return r;
}

// Said once, by rank 0, for every rank that overran (the count is summed over the
// ranks: every rank takes part, after the loop).
void Trainer::warn_overruns(int64_t done) const {
  std::vector<double> overruns(static_cast<size_t>(world_), 0.0);
  overruns[static_cast<size_t>(rank_)] = static_cast<double>(bsp_->overruns() + segments_->overruns());
  comm_.allreduce_sum(overruns.data(), overruns.size(), "counting the steps that overran their emulated time");
  if (rank_ != 0) return;
  int ranks = 0;
  size_t most = 0;
  for (size_t r = 0; r < overruns.size(); ++r) {
    if (overruns[r] > static_cast<double>(done) / 20) ++ranks;
    if (overruns[r] > overruns[most]) most = r;
  }
  if (ranks == 0) return;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string why = world_ > cores ? fmt::format("{} ranks on {} cores: the cores are oversubscribed", world_, cores)
                                         : std::string("the machine was busy, or emulated faster than it computes");
  log::warn("{} of {} ranks computed longer than their emulated time (r{}: {:.0f} of {} steps) - {}; lower "
               "emulation.reference or use fewer workers for a faithful emulation",
               ranks, world_, most, overruns[most], done, why);
}

}  // namespace

RunSummary train(const ExperimentConfig& cfg, Comm& comm, const DeviceChoice& device, PlanPolicy* policy,
                 const ConsoleFactory& console) {
  Trainer trainer(cfg, comm, device, policy, console);
  return trainer.run();
}

}  // namespace tandem
