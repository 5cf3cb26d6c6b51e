#include "engine/train/sync/relaxed_segment.hpp"

#include "engine/nn/sgd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/log.hpp"
#include <cstring>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"

namespace tandem {

namespace {

// Per-step sums, turned into the means a WorkerStats reports.
struct Sums {
  WorkerStats s;
  void add(const WorkerStats& step) {
    s.data_ms += step.data_ms;
    s.compute_ms += step.compute_ms;
    s.real_compute_ms += step.real_compute_ms;
    s.idle_ms += step.idle_ms;
    s.comm_ms += step.comm_ms;
    s.optimizer_ms += step.optimizer_ms;
    s.step_ms += step.step_ms;
    s.loss_sum += step.loss_sum;
    s.correct += step.correct;
    s.grad_sq += step.grad_sq;
    s.staleness += step.staleness;
    s.pushes += step.pushes;
    s.speed += step.speed;
  }
  WorkerStats means(int64_t steps) {
    const double n = static_cast<double>(std::max<int64_t>(steps, 1));
    WorkerStats m = s;
    m.steps = steps;
    for (double* v : {&m.data_ms, &m.compute_ms, &m.real_compute_ms, &m.idle_ms, &m.comm_ms, &m.optimizer_ms,
                      &m.step_ms, &m.grad_sq, &m.speed, &m.loss_sum})
      *v /= n;
    m.correct = std::llround(static_cast<double>(s.correct) / n);
    m.staleness = s.pushes > 0 ? s.staleness / static_cast<double>(s.pushes) : 0.0;
    m.samples_per_s = m.compute_ms > 0 ? static_cast<double>(m.local_batch) / (m.compute_ms / 1000.0) : 0.0;
    return m;
  }
};

}  // namespace

SegmentRunner::SegmentRunner(const ExperimentConfig& cfg, Comm& comm, Model& model, Optimizer& optimizer, TrainStep& step,
                             BatchLoader& loader, const Emulator& emulator, const DeviceProfile& machine,
                             const LrSchedule& schedule)
    : cfg_(cfg), comm_(comm), model_(model), optimizer_(optimizer), step_(step), loader_(loader), emulator_(emulator),
      machine_(machine), schedule_(schedule), rank_(comm.rank()), world_(comm.size()),
      nonfinite_(cfg.max_nonfinite_steps) {
  if (auto* sgd = dynamic_cast<Sgd*>(&optimizer); sgd && sgd->velocity().defined()) velocity_ = &sgd->velocity();
}

SegmentRunner::~SegmentRunner() = default;

double SegmentRunner::emulate(int64_t iteration, int64_t local_batch, double anchor, double real_ms) {
  if (!cfg_.emulation.enabled) return real_ms;
  const Stretch s = emulator_.stretch(rank_, iteration, local_batch, profile_ms(machine_, static_cast<double>(local_batch)));
  const double deadline = anchor + host_profile_ms(machine_, static_cast<double>(local_batch)) + s.target_ms;
  if (now_ms() > deadline) ++overruns_;
  sleep_until_ms(deadline);
  return std::max(s.target_ms, real_ms);
}

WorkerStats SegmentRunner::compute(int64_t iteration, int64_t local_batch, int64_t offset, double anchor) {
  const double start = now_ms();
  WorkerStats w{};
  const Tensor& x = loader_.load(iteration, offset, local_batch);
  w.data_ms = now_ms() - start;
  // No reducer: workers run apart here, so batch norm keeps each one's own statistics.
  StepContext ctx;
  ctx.seed = mix_seed(cfg_.seed, static_cast<uint64_t>(iteration));
  ctx.first_sample = offset;
  const double compute_start = now_ms();
  // A plan's micro-batches are bsp's (Plan::validate): a relaxed segment computes in
  // the experiment's accumulate, whatever the last bsp plan set.
  step_.set_micro_batches(cfg_.accumulate);
  const LossResult loss = step_.compute(x, loader_.labels(), ctx);
  if (faults_ && faults_->nan_at(iteration))
    model_.device().fill(model_.grads().data(), 1, std::numeric_limits<float>::quiet_NaN());
  if (faults_) faults_->at(iteration, "compute");
  w.real_compute_ms = now_ms() - compute_start;
  w.compute_ms = emulate(iteration, local_batch, anchor, w.real_compute_ms);
  w.speed = emulator_.speed(rank_, iteration);
  w.loss_sum = loss.loss_sum;
  w.correct = loss.correct;
  // A NaN or Inf goes on to the server, which skips the update (parameter_server.cpp);
  // local SGD skips the local step (run_local).
  return w;
}

void SegmentRunner::params_to_host(std::vector<float>& p, std::vector<float>& v) {
  const size_t n = model_.param_count();
  p.resize(n);
  v.assign(n, 0.0f);
  model_.device().copy_to_host(p.data(), model_.params().data(), n);
  if (velocity_) model_.device().copy_to_host(v.data(), velocity_->data(), n);
}

void SegmentRunner::params_from_host(const std::vector<float>& p, const std::vector<float>& v) {
  const size_t n = model_.param_count();
  model_.device().copy_from_host(model_.params().data(), p.data(), n);
  if (velocity_) model_.device().copy_from_host(velocity_->data(), v.data(), n);
}

GroupComm& SegmentRunner::group_comm(const Plan& plan) {
  // Splitting is a collective over every rank; all enter the segment together, and
  // the groups are kept while the plan's stay the same.
  if (!group_ || groups_of_ != plan.sync.group) {
    // Freeing the old group's shared window is a collective without a deadline:
    // every rank is checked present first, so a dead one is named, not waited for.
    if (group_) comm_.barrier("regrouping the sync groups");
    group_.reset();
    group_ = comm_.split(plan.sync.group[static_cast<size_t>(rank_)], "forming the sync groups");
    // Room for the gradient's all-reduce and the server's reply (header + weights),
    // set up while every member is here.
    group_->prepare((sizeof(ReplyHeader) + model_.param_count() * sizeof(float) + sizeof(float) - 1) / sizeof(float));
    groups_of_ = plan.sync.group;
  }
  return *group_;
}

SegmentResult SegmentRunner::run(const Plan& plan, int64_t t, int64_t max_iterations, double anchor, double origin,
                                 int64_t* version) {
  TANDEM_CHECK(max_iterations >= 1, "a segment of ", max_iterations, " iterations (a bug in tandem)");
  const std::string refusal = bsp_only_reason(cfg_);
  TANDEM_CHECK(refusal.empty(), "a ", sync_mode_name(plan.sync.mode), " segment was started although ", refusal,
               " (a bug in tandem: the plan should have been refused)");
  const double start = now_ms();
  SegmentResult r = plan.sync.mode == SyncMode::local
                        ? run_local(plan, t, std::min<int64_t>(plan.sync.local_steps, max_iterations), anchor, origin)
                        : run_server(plan, t, max_iterations, anchor, origin, version);
  r.segment_ms = r.end_ms - start;
  if (plan.sync.mode == SyncMode::local) ++*version;
  // Every rank must hold the same version now: a disagreement means an update was
  // lost or applied twice somewhere, which must never pass silently.
  double versions = static_cast<double>(*version);
  comm_.allreduce_sum(&versions, 1, "checking the weights' version at the meeting");
  TANDEM_CHECK(versions == static_cast<double>(*version) * world_, "after the ", sync_mode_name(plan.sync.mode),
               " segment at iteration ", t, " the ranks disagree on the weights' version (rank ", rank_, " holds ",
               *version, ", the sum over ranks is ", versions, "): an update was lost or applied twice (a bug in tandem)");
  return r;
}

SegmentResult SegmentRunner::run_local(const Plan& plan, int64_t t, int64_t iterations, double anchor, double origin) {
  const int64_t b = plan.local_batch[static_cast<size_t>(rank_)], offset = plan.offset(rank_);
  Device& dev = model_.device();
  Sums sums;
  int64_t skipped = 0;
  for (int64_t i = 0; i < iterations; ++i) {
    const int64_t it = t + i;
    const double start = now_ms();
    WorkerStats w = compute(it, b, offset, anchor);
    const double opt_start = now_ms();
    if (b > 0) {
      const double grad_sq = dev.sum_squares(model_.grads().data(), model_.param_count());
      if (std::isfinite(grad_sq) && std::isfinite(w.loss_sum)) {
        nonfinite_.finite();
        w.grad_sq = grad_sq / static_cast<double>(b * b);
        // Local SGD: this worker's own mean gradient, the learning rate as bsp's.
        optimizer_.step(model_.params(), model_.grads(), schedule_.at(it), 1.0 / static_cast<double>(b));
      } else {
        // Only this worker's model would take it, and the average would spread it:
        // the local step is skipped.
        ++skipped;
        const bool stop = nonfinite_.skipped();
        log::warn("rank {}, iteration {} (local SGD): the loss or gradient is not finite: this local step is "
                     "skipped ({})", rank_, it, nonfinite_.progress());
        if (stop)
          TANDEM_FAIL_HINT("lower the learning rate (lr=...) or local_steps; resume from the last checkpoint with "
                           "tandem run --resume RUN_DIR",
                           nonfinite_.diverged("local steps", fmt::format("rank {}, the last at iteration {}", rank_, it)));
      }
    }
    w.optimizer_ms = now_ms() - opt_start;
    anchor = now_ms();
    w.step_ms = anchor - start;
    sums.add(w);
  }
  // The meeting: the models and momenta averaged, each weighted by the samples it
  // trained on since the last meeting (equal batches: the plain average).
  const double meet_start = now_ms();
  comm_.barrier("the local-SGD meeting");
  const double idle = now_ms() - meet_start;
  params_to_host(host_params_, host_velocity_);
  double samples = static_cast<double>(b * iterations);
  const float weight = static_cast<float>(samples);
  for (float& v : host_params_) v *= weight;
  for (float& v : host_velocity_) v *= weight;
  comm_.allreduce_sum(host_params_.data(), host_params_.size(), "averaging the local-SGD models");
  if (velocity_)
    comm_.allreduce_sum(host_velocity_.data(), host_velocity_.size(), "averaging the local-SGD momenta");
  comm_.allreduce_sum(&samples, 1, "averaging the local-SGD models");
  const float inv = static_cast<float>(1.0 / samples);
  for (float& v : host_params_) v *= inv;
  for (float& v : host_velocity_) v *= inv;
  params_from_host(host_params_, host_velocity_);
  SegmentResult r;
  r.iterations = iterations;
  r.end_ms = now_ms();
  r.stats = sums.means(iterations);
  r.skipped = skipped;
  // The meeting's wait and averaging belong to the steps it ends: shared out over
  // them, in step_ms too (so idle and comm stay parts of the step).
  r.stats.idle_ms += idle / static_cast<double>(iterations);
  r.stats.comm_ms += (r.end_ms - meet_start - idle) / static_cast<double>(iterations);
  r.stats.step_ms += (r.end_ms - meet_start) / static_cast<double>(iterations);
  r.stats.local_batch = b;
  r.stats.start_ms = meet_start - origin;
  return r;
}

SegmentResult SegmentRunner::run_server(const Plan& plan, int64_t t, int64_t max_iterations, double anchor,
                                        double origin, int64_t* version) {
  const size_t n = model_.param_count();
  if (!channel_)
    channel_ = comm_.open_channel("opening the parameter server's channel", {kPushTag, kReplyTag},
                                  std::max(sizeof(PushHeader), sizeof(ReplyHeader)) + n * sizeof(float));
  if (rank_ == 0 && !server_)
    server_ = std::make_unique<ParameterServer>(comm_, *channel_, n, cfg_.optimizer, schedule_, cfg_.global_batch,
                                                cfg_.max_nonfinite_steps);
  const bool grouped = plan.sync.mode == SyncMode::grouped;
  GroupComm* group = grouped ? &group_comm(plan) : nullptr;
  const int64_t b = plan.local_batch[static_cast<size_t>(rank_)], offset = plan.offset(rank_);
  int64_t group_samples = 0;  // what the (group's) push carries
  for (size_t r = 0; r < plan.local_batch.size(); ++r)
    if (grouped ? plan.sync.group[r] == plan.sync.group[static_cast<size_t>(rank_)] : r == static_cast<size_t>(rank_))
      group_samples += plan.local_batch[r];
  // The segment ends after sync_every global batches' worth of updates, or sooner
  // for an evaluation or the end of the run.
  Plan segment = plan;
  segment.sync.sync_every = static_cast<int>(std::min<int64_t>(plan.sync.sync_every, max_iterations));
  if (rank_ == 0) {
    params_to_host(host_params_, host_velocity_);
    server_->begin(segment, host_params_.data(), velocity_ ? host_velocity_.data() : nullptr,
                   *version, t);
  }
  Device& dev = model_.device();
  grads_.resize(n);
  message_.resize(std::max(sizeof(PushHeader), sizeof(ReplyHeader)) + n * sizeof(float));
  int64_t base = *version, steps = 0;
  Sums sums;
  const bool leader = !grouped || group->rank() == 0;
  for (bool meet = false; !meet; ++steps) {
    const int64_t it = t + steps;
    const double start = now_ms();
    WorkerStats w = compute(it, b, offset, anchor);
    const double comm_start = now_ms();
    dev.copy_to_host(grads_.data(), model_.grads().data(), n);
    if (grouped) group->allreduce_sum(grads_.data(), n, "the group's gradient all-reduce");
    const size_t reply_bytes = sizeof(ReplyHeader) + n * sizeof(float);
    if (leader) {
      PushHeader h;
      h.group = grouped ? plan.sync.group[static_cast<size_t>(rank_)] : rank_;
      h.rank = rank_;
      h.base_version = base;
      h.samples = group_samples;
      std::memcpy(message_.data(), &h, sizeof h);
      std::memcpy(message_.data() + sizeof h, grads_.data(), n * sizeof(float));
      channel_->send(0, kPushTag, message_.data(), sizeof h + n * sizeof(float), "pushing a gradient to the server");
      channel_->receive(0, kReplyTag, message_.data(), reply_bytes, "waiting for the parameter server's reply");
      w.pushes = 1;
    }
    if (grouped) group->broadcast(message_.data(), reply_bytes, "the server's weights to the group");
    ReplyHeader h;
    std::memcpy(&h, message_.data(), sizeof h);
    dev.copy_from_host(model_.params().data(), reinterpret_cast<const float*>(message_.data() + sizeof h), n);
    base = h.version;
    meet = h.meet != 0;
    if (leader && !h.dropped) w.staleness = h.staleness;  // a dropped push is counted, not aged
    w.comm_ms = now_ms() - comm_start;
    anchor = now_ms();
    w.step_ms = anchor - start;
    sums.add(w);
  }
  // The meeting: every worker takes the server's weights and momentum.
  const double meet_start = now_ms();
  comm_.barrier("the parameter-server meeting");
  const double idle = now_ms() - meet_start;
  SegmentResult r;
  struct Header {
    int64_t version;
    double iterations;
  } head{0, 0.0};
  if (rank_ == 0) r.server = server_->finish(host_params_.data(), host_velocity_.data(), &head.version, &head.iterations);
  comm_.broadcast(&head, sizeof head, "the server's version at the meeting");
  host_params_.resize(n);
  host_velocity_.resize(n);
  comm_.broadcast(host_params_.data(), n * sizeof(float), "the server's weights at the meeting");
  if (velocity_)
    comm_.broadcast(host_velocity_.data(), n * sizeof(float), "the server's momentum at the meeting");
  params_from_host(host_params_, host_velocity_);
  *version = head.version;
  // Updates in flight when the meeting was called still land, so a segment covers a
  // little more than its share; the fractions are carried so the run's count of
  // global batches stays exact.
  server_iterations_ += head.iterations;
  const auto whole = static_cast<int64_t>(std::floor(server_iterations_ + 1e-9));
  r.iterations = std::max<int64_t>(1, whole - server_counted_);
  server_counted_ += r.iterations;
  r.end_ms = now_ms();
  r.stats = sums.means(steps);
  r.stats.idle_ms += idle / static_cast<double>(steps);
  r.stats.step_ms += (r.end_ms - meet_start) / static_cast<double>(steps);
  r.stats.local_batch = b;
  r.stats.group = grouped ? plan.sync.group[static_cast<size_t>(rank_)] : 0;
  r.stats.start_ms = meet_start - origin;
  return r;
}

}  // namespace tandem
