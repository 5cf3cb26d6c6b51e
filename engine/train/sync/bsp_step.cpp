#include "engine/train/sync/bsp_step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "engine/core/log.hpp"

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"
#include "engine/train/sync/bucket_plan.hpp"

namespace tandem {

namespace {

// What keeps a run from the fused step ("" when nothing does): anything that needs a
// number on the host between the compute and the update.
std::string fused_step_obstacle(const BspParts& p, int world, bool measure_noise, bool layer_state) {
  if (world > 1)
    return fmt::format("{} workers (their gradients are summed between the compute and the update)", world);
  if (p.cfg.emulation.enabled) return "emulated heterogeneity (it times the compute apart from the update)";
  if (measure_noise)
    return "a policy or lr_scaling = 'adascale' (they read the gradient's norm between the compute and the update)";
  if (layer_state) return "batch norm (its statistics come to the host in every pass)";
  return "";
}

}  // namespace

BspStep::BspStep(const BspParts& parts, bool plans_known)
    : p_(parts), rank_(parts.comm.rank()), world_(parts.comm.size()), plans_known_(plans_known),
      has_layer_state_(!parts.model.layer_state().empty()), nonfinite_(parts.cfg.max_nonfinite_steps),
      measure_noise_(!parts.cfg.policy.file.empty() || parts.cfg.adascale_gain()) {
  for (int r = 0; r < world_; ++r) link_delay_ms_ = std::max(link_delay_ms_, p_.emulator.comm_delay_ms(r));
  if (p_.cfg.emulation.enabled && p_.gradients.readiness()) emulated_ready_points_ = p_.model.gradient_ready_points();
  const std::string& mode = p_.cfg.fused_step;
  fused_obstacle_ = fused_step_obstacle(p_, world_, measure_noise_, has_layer_state_);
  if (mode == "always" && !fused_obstacle_.empty())
    TANDEM_FAIL_HINT("set fused_step = 'auto', which takes the fused step where the run allows it",
                     "fused_step = 'always', but this run has ", fused_obstacle_);
  const bool gpu = p_.model.device().kind() != DeviceKind::cpu;
  if (fused_obstacle_.empty() && mode == "never") fused_obstacle_ = "fused_step = 'never'";
  if (fused_obstacle_.empty() && mode == "auto" && !gpu)
    fused_obstacle_ = "a CPU worker (it saves a GPU's waits; fused_step = 'always' takes it on a CPU too)";
  fused_ = fused_obstacle_.empty();
  // A plan drawn at random each iteration gives each step a batch size of its own: a
  // graph per size would be captured and hardly replayed.
  if (fused_ && !plans_known_) p_.step.set_graphs(false);
  // The step op by op (several workers, a policy, emulation) still replays its compute
  // from a graph per local batch where the device captures (TrainStep::compute): a
  // plan in force for many iterations reuses one. Not for random plans (a new batch
  // each iteration), nor with fused_step = 'never' (the plain reference).
  if (!fused_ && plans_known_ && mode != "never") p_.step.set_compute_graphs(true);
}

BatchSpan BspStep::place(const Plan& plan, int64_t t) {
  const BatchSpan span = p_.positions.at(t);
  TANDEM_CHECK(span.size == plan.global_batch(), "iteration ", t, " runs plan ", plan.str(), " (a global batch of ",
               plan.global_batch(), ") where the sampler placed ", span.size, " samples (a bug in tandem)");
  batch_ = span.size;
  samples_before_ = span.samples_before;
  return span;
}

int64_t BspStep::use_micro_batches(const Plan& plan, int64_t b) {
  p_.step.set_micro_batches(plan.micro(rank_, p_.cfg.accumulate));
  return p_.step.passes(b);
}

void BspStep::prefetch(int64_t t, const Plan& plan) {
  p_.positions.resize(t, plan.global_batch());
  p_.loader.prefetch(t, plan.offset(rank_), plan.local_batch[static_cast<size_t>(rank_)]);
}

StepResult BspStep::run(const Plan& plan, int64_t t, Boundary& boundary) {
  if (fused_) return run_fused(plan, t, boundary);
  const int64_t b = plan.local_batch[static_cast<size_t>(rank_)], offset = plan.offset(rank_);
  const int64_t passes = use_micro_batches(plan, b);
  const BatchSpan span = place(plan, t);
  // The emulated device's time for this step, known before the compute: whether it
  // tells its gradient buckets at its own pace (compute(), emulate()).
  if (p_.cfg.emulation.enabled)
    stretch_ = p_.emulator.stretch(rank_, t, b, profile_ms(p_.machine, static_cast<double>(b), passes), passes);
  const double start = now_ms();
  WorkerStats now = boundary.begin_stats(t, b, start);
  now.micro_batches = passes;
  const Tensor& x = p_.loader.load(t, offset, b);
  now.data_ms = now_ms() - start;
  now.stats_ms = boundary.post_ms();
  boundary.stats_in(t, &now.stats_ms);  // the policy decides while this rank computes
  const bool finite = compute(x, t, offset, now);
  now.compute_end_ms = now_ms() - p_.timeline.origin();  // an emulated device's: after emulate()
  Control out = boundary.decide(t, &now.stats_ms);
  emulate(t, now);
  out.nonfinite.assign(static_cast<size_t>(world_), false);
  out.nonfinite[static_cast<size_t>(rank_)] = !finite;
  StepResult r;
  r.done = t + 1;
  r.control = synchronize(out, now);
  const double opt_start = now_ms();
  const bool stepped = update(r.control, t, boundary);
  now.optimizer_ms = now_ms() - opt_start;
  p_.progress.samples_drawn = samples_before_ + batch_;
  p_.progress.sample_cursor = span.start + span.size;
  // Rank 0's noise scale rides with this iteration's gradients and is in force from the next.
  if (r.control.noise_scale) p_.progress.noise_scale = *r.control.noise_scale;
  // A GPU runs the update it was just given while the host gathers the next batch
  // and the copy engine uploads it (on the CPU this does nothing).
  if (r.done < p_.total && (plans_known_ || r.control.plan)) prefetch(t + 1, r.control.plan ? *r.control.plan : plan);
  now.step_ms = now_ms() - start;
  boundary.post(now);  // leaves for rank 0 now, to be there by its next compute
  p_.progress.train_ms += now.step_ms;
  if (stepped) p_.progress.samples += batch_;
  return r;
}

bool BspStep::compute(const Tensor& x, int64_t t, int64_t offset, WorkerStats& now) {
  StepContext ctx;
  ctx.reducer = p_.reducer;
  ctx.seed = mix_seed(p_.cfg.seed, static_cast<uint64_t>(t));
  ctx.first_sample = offset;
  Device& dev = p_.model.device();
  // With gradient buckets, each is summed from when the backward pass finishes it.
  p_.gradients.begin_step();
  // An emulated device's backward pass finishes them at its own pace (emulate()), not
  // at this machine's: told there, they hide as much of the sums as that device would.
  // One emulated faster than this machine computes runs at real speed, and tells them
  // as the real pass finishes them.
  ctx.grads_ready = stretch_ && !stretch_->clamped ? nullptr : p_.gradients.readiness();
  const double compute_start = now_ms();
  if (has_layer_state_) layer_state_before_ = p_.model.layer_state();
  const LossResult loss = p_.step.compute(x, p_.loader.labels(), ctx);
  if (p_.faults.nan_at(t)) dev.fill(p_.model.grads().data(), 1, std::numeric_limits<float>::quiet_NaN());
  p_.faults.at(t, "compute");
  now.real_compute_ms = now_ms() - compute_start;
  now.loss_sum = loss.loss_sum;
  now.correct = loss.correct;
  // Whether this rank's loss and gradient are finite (its squared norm: one pass,
  // which the policy's gradient-noise estimate wants anyway: the mean gradient's).
  const double grad_sq = p_.gradients.local_grad_sq();
  const bool finite = std::isfinite(loss.loss_sum) && std::isfinite(grad_sq);
  if (measure_noise_ && now.local_batch > 0 && finite)
    now.grad_sq = grad_sq / static_cast<double>(now.local_batch * now.local_batch);
  return finite;
}

// A fused iteration: step t queued whole, then step t - 1 read (a GPU is on step t by
// then) and its books kept and its stats posted, for decide(t) to record them as it
// records every iteration's one late. Step t is read at the next iteration, or by the
// trainer before a boundary that needs it (settle()).
StepResult BspStep::run_fused(const Plan& plan, int64_t t, Boundary& boundary) {
  const int64_t b = plan.local_batch[static_cast<size_t>(rank_)];
  const int64_t passes = use_micro_batches(plan, b);
  const BatchSpan span = place(plan, t);
  Unread u;
  u.t = t;
  u.batch = span.size;
  u.start = now_ms();
  u.now = boundary.begin_stats(t, b, u.start);
  u.now.micro_batches = passes;
  const Tensor& x = p_.loader.load(t, 0, b);
  u.now.data_ms = now_ms() - u.start;
  u.lr = learning_rate();
  StepContext ctx;
  ctx.seed = mix_seed(p_.cfg.seed, static_cast<uint64_t>(t));
  u.queue_start = now_ms();
  p_.step.fused_queue(x, p_.loader.labels(), ctx, u.lr, p_.faults.nan_at(t));
  u.queue_ms = now_ms() - u.queue_start;
  // The next batch's gather queued behind the step (run() asks again after the
  // Control, for a plan it changed; the same slice is not gathered twice).
  if (t + 1 < p_.total && plans_known_) prefetch(t + 1, plan);
  // Step t - 1, which a GPU has finished by now: read, its books kept, its stats
  // posted for decide(t) below to record.
  settle_unread(boundary, false);  // its wait is this iteration's
  unread_ = std::move(u);
  WorkerStats& now = unread_->now;
  now.stats_ms = boundary.post_ms();
  boundary.stats_in(t, &now.stats_ms);
  p_.faults.at(t, "compute");
  Control out = boundary.decide(t, &now.stats_ms);
  out.nonfinite.assign(static_cast<size_t>(world_), false);  // step t's is read later
  StepResult r;
  r.done = t + 1;
  r.control = synchronize(out, now);
  p_.progress.samples_drawn = samples_before_ + batch_;
  p_.progress.sample_cursor = span.start + span.size;
  if (r.done < p_.total && r.control.plan) prefetch(t + 1, *r.control.plan);
  unread_->step_ms = now_ms() - unread_->start;
  return r;
}

void BspStep::settle(Boundary& boundary) { settle_unread(boundary, true); }

void BspStep::settle_unread(Boundary& boundary, bool count_wait) {
  if (!unread_) return;
  Unread u = std::move(*unread_);
  unread_.reset();
  const double wait_start = now_ms();
  const FusedResult f = p_.step.fused_finish();
  WorkerStats& now = u.now;
  // The host's time queueing the step and waiting for its read: on a CPU all of its
  // compute, update included; on a GPU the part the host saw (optimizer_ms stays 0).
  const double wait_ms = now_ms() - wait_start;
  now.real_compute_ms = u.queue_ms + wait_ms;
  now.loss_sum = f.loss.loss_sum;
  now.correct = f.loss.correct;
  // Drawn from where the step was queued (the trace's compute span): on a CPU it ran
  // there; on a GPU it ran from there on, until at most the read.
  now.compute_end_ms = u.queue_start + now.real_compute_ms - p_.timeline.origin();
  emulate(u.t, now);
  Control c;
  c.nonfinite.assign(static_cast<size_t>(world_), false);
  c.nonfinite[static_cast<size_t>(rank_)] = !f.finite;
  const bool stepped = settle_fused(c, u.t, u.lr);
  // Read before a boundary: the wait belongs to the step (no later iteration has it).
  now.step_ms = u.step_ms + (count_wait ? wait_ms : 0.0);
  boundary.post(now);
  p_.progress.train_ms += now.step_ms;
  if (stepped) p_.progress.samples += u.batch;
}

void BspStep::emulate(int64_t t, WorkerStats& now) {
  const int64_t b = now.local_batch;
  if (!p_.cfg.emulation.enabled) {
    now.compute_ms = now.real_compute_ms;
  } else {
    // The calibrated machine's time for the batch in its micro-batches, each paying
    // a pass's fixed cost (what the real compute of them does).
    // run() took it before the compute (the fused step, the only other caller, is never
    // emulated: fused_step_obstacle).
    TANDEM_CHECK(stretch_, "an emulated step without its device time (a bug in tandem)");
    const Stretch s = *stretch_;
    stretch_.reset();
    if (s.clamped && !warned_clamp_) {
      log::warn("rank {} is emulated faster than this machine computes ({:.2f} ms for {} samples); it runs at "
                   "real speed (lower emulation.reference to avoid this)", rank_, s.target_ms, b);
      warned_clamp_ = true;
    }
    // The host part (loading, the optimizer step) takes what it takes on an idle
    // core (calibrated), then the device computes for the target time, all counted
    // from the timeline's anchor (progress.hpp).
    const double device_start = p_.timeline.anchor() + host_profile_ms(p_.machine, static_cast<double>(b));
    const double deadline = device_start + s.target_ms;
    if (now_ms() > deadline) ++overruns_;
    // With gradient buckets, each layer's gradients become final when the emulated
    // device's backward pass would finish them (the simulator's rule), so the sums
    // start then rather than during the real compute (which would hide them behind
    // the rest of the emulated time). Past times (an overrun) tell at once. Rank 0's
    // decide() ran first: a slow one (late reports) delays the first buckets.
    if (!s.clamped && !emulated_ready_points_.empty()) {
      const double share = p_.model.backward_share();
      for (const size_t point : emulated_ready_points_) {
        sleep_until_ms(device_start +
                       s.target_ms * ready_fraction(point, p_.model.param_count(), share, now.micro_batches));
        p_.gradients.hand_ready_from(point);
      }
    }
    sleep_until_ms(deadline);
    now.compute_end_ms = now_ms() - p_.timeline.origin();
    now.speed = p_.emulator.speed(rank_, t);
    // The emulated device's time, unless the real compute outlasted it.
    now.compute_ms = std::max(s.target_ms, now.real_compute_ms);
  }
  now.samples_per_s = now.compute_ms > 0 ? static_cast<double>(b) / (now.compute_ms / 1000.0) : 0.0;
  now.memory_mb = static_cast<double>(p_.model.device().bytes_in_use()) / (1024.0 * 1024.0);
}

// Every rank waits for the slowest to arrive (idle), then the gradients are summed
// (comm). An emulated slow link holds every rank: a collective is as slow as its
// slowest link.
Control BspStep::synchronize(const Control& out, WorkerStats& now) {
  const double sync_start = now_ms();
  now.sync_start_ms = sync_start - p_.timeline.origin();
  p_.faults.at(now.iteration, "allreduce");
  Control in = p_.gradients.run(out, &now.idle_ms, "the gradient all-reduce");
  if (const GradientSync::BucketSums sums = p_.gradients.bucket_sums(); sums.count > 0) {
    now.buckets_start_ms = sums.start_ms - p_.timeline.origin();
    now.allreduce_ms = sums.end_ms - sums.start_ms;
    now.buckets = sums.count;
  }
  if (world_ == 1) {
    p_.timeline.restart();
    return in;
  }
  if (link_delay_ms_ > 0) sleep_until_ms(now_ms() + link_delay_ms_);
  now.comm_ms = now_ms() - sync_start - now.idle_ms;
  p_.timeline.synced(p_.gradients.last_sync_end_ms() + link_delay_ms_);
  return in;
}

void BspStep::skip(const Control& in, int64_t t) {
  ++p_.progress.skipped_steps;
  const bool stop = nonfinite_.skipped();
  if (rank_ == 0)
    log::warn("iteration {}: the loss or gradient of rank(s) {} is not finite (NaN or Inf): every rank skips "
                 "this step ({})", t, in.nonfinite_ranks(), nonfinite_.progress());
  if (stop)
    TANDEM_FAIL_HINT("lower the learning rate (lr=...), add warm-up (schedule.warmup_iterations=...), or check "
                     "the data; resume from the last checkpoint with tandem run --resume RUN_DIR",
                     nonfinite_.diverged("steps", fmt::format("loss or gradient, the last from rank(s) {} at "
                                                              "iteration {}", in.nonfinite_ranks(), t)));
  if (has_layer_state_) p_.model.load_layer_state(layer_state_before_);
}

double BspStep::learning_rate() const {
  // The schedule runs on samples drawn, in global batches of B0; the rule of
  // lr_scaling scales it to this iteration's B (the same on every rank).
  const int64_t b0 = p_.cfg.global_batch;
  return p_.schedule.at_position(static_cast<double>(samples_before_) / static_cast<double>(b0)) *
         lr_batch_scale(p_.cfg.lr_scaling, batch_, b0, p_.progress.noise_scale);
}

void BspStep::note_update(double lr, int64_t t) {
  ++p_.progress.version;
  p_.progress.lr = lr;
  p_.progress.lr_iteration = t;
}

bool BspStep::settle_fused(const Control& in, int64_t t, double lr) {
  if (in.any_nonfinite()) {  // the device skipped the update already
    skip(in, t);
    return false;
  }
  nonfinite_.finite();
  note_update(lr, t);
  return true;
}

bool BspStep::update(const Control& in, int64_t t, Boundary& boundary) {
  if (in.any_nonfinite()) {
    skip(in, t);
    return false;
  }
  nonfinite_.finite();
  // The summed gradient's squared norm, one pass for both that want it: the policy's
  // next look (the global mean gradient, rank 0) and clipping.
  const bool for_policy = rank_ == 0 && measure_noise_;
  std::optional<double> grad_sq;
  if (for_policy || p_.cfg.optimizer.clip_grad_norm > 0.0)
    grad_sq = p_.model.device().sum_squares(p_.model.grads().data(), p_.model.param_count());
  if (for_policy) boundary.global_gradient(*grad_sq / static_cast<double>(batch_ * batch_));
  const double lr = learning_rate();
  note_update(lr, t);
  p_.step.update(batch_, lr, grad_sq);
  return true;
}

}  // namespace tandem
