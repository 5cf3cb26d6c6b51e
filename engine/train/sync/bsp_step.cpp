#include "engine/train/sync/bsp_step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <spdlog/spdlog.h>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"

namespace tandem {

BspStep::BspStep(const BspParts& parts, bool plans_known)
    : p_(parts), rank_(parts.comm.rank()), world_(parts.comm.size()), plans_known_(plans_known),
      has_layer_state_(!parts.model.layer_state().empty()), nonfinite_(parts.cfg.max_nonfinite_steps),
      measure_noise_(!parts.cfg.policy.file.empty() || parts.cfg.adascale_gain()) {
  for (int r = 0; r < world_; ++r) link_delay_ms_ = std::max(link_delay_ms_, p_.emulator.comm_delay_ms(r));
}

StepResult BspStep::run(const Plan& plan, int64_t t, Boundary& boundary) {
  const int64_t b = plan.local_batch[static_cast<size_t>(rank_)], offset = plan.offset(rank_);
  const BatchSpan span = p_.positions.at(t);
  TANDEM_CHECK(span.size == plan.global_batch(), "iteration ", t, " runs plan ", plan.str(), " (a global batch of ",
               plan.global_batch(), ") where the sampler placed ", span.size, " samples (a bug in tandem)");
  batch_ = span.size;
  samples_before_ = span.samples_before;
  const double start = now_ms();
  WorkerStats now = boundary.begin_stats(t, b, start);
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
  if (r.done < p_.total && (plans_known_ || r.control.plan)) {
    const Plan& upcoming = r.control.plan ? *r.control.plan : plan;
    p_.positions.resize(t + 1, upcoming.global_batch());
    p_.loader.prefetch(t + 1, upcoming.offset(rank_), upcoming.local_batch[static_cast<size_t>(rank_)]);
  }
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
  const double grad_sq = dev.sum_squares(p_.model.grads().data(), p_.model.param_count());
  const bool finite = std::isfinite(loss.loss_sum) && std::isfinite(grad_sq);
  if (measure_noise_ && now.local_batch > 0 && finite)
    now.grad_sq = grad_sq / static_cast<double>(now.local_batch * now.local_batch);
  return finite;
}

void BspStep::emulate(int64_t t, WorkerStats& now) {
  const int64_t b = now.local_batch;
  if (!p_.cfg.emulation.enabled) {
    now.compute_ms = now.real_compute_ms;
  } else {
    const Stretch s = p_.emulator.stretch(rank_, t, b, profile_ms(p_.machine, static_cast<double>(b)));
    if (s.clamped && !warned_clamp_) {
      spdlog::warn("rank {} is emulated faster than this machine computes ({:.2f} ms for {} samples); it runs at "
                   "real speed (lower emulation.reference to avoid this)", rank_, s.target_ms, b);
      warned_clamp_ = true;
    }
    // The host part (loading, the optimizer step) takes what it takes on an idle
    // core (calibrated), then the device computes for the target time, all counted
    // from the timeline's anchor (progress.hpp).
    const double device_start = p_.timeline.anchor() + host_profile_ms(p_.machine, static_cast<double>(b));
    const double deadline = device_start + s.target_ms;
    if (now_ms() > deadline) ++overruns_;
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
  if (world_ == 1) {
    p_.timeline.restart();
    return in;
  }
  if (link_delay_ms_ > 0) sleep_until_ms(now_ms() + link_delay_ms_);
  now.comm_ms = now_ms() - sync_start - now.idle_ms;
  p_.timeline.synced(p_.comm.last_sync_end_ms() + link_delay_ms_);
  return in;
}

bool BspStep::update(const Control& in, int64_t t, Boundary& boundary) {
  if (in.any_nonfinite()) {
    ++p_.progress.skipped_steps;
    const bool stop = nonfinite_.skipped();
    if (rank_ == 0)
      spdlog::warn("iteration {}: the loss or gradient of rank(s) {} is not finite (NaN or Inf): every rank skips "
                   "this step ({})", t, in.nonfinite_ranks(), nonfinite_.progress());
    if (stop)
      TANDEM_FAIL_HINT("lower the learning rate (lr=...), add warm-up (schedule.warmup_iterations=...), or check "
                       "the data; resume from the last checkpoint with tandem run --resume RUN_DIR",
                       nonfinite_.diverged("steps", fmt::format("loss or gradient, the last from rank(s) {} at "
                                                                "iteration {}", in.nonfinite_ranks(), t)));
    if (has_layer_state_) p_.model.load_layer_state(layer_state_before_);
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
  ++p_.progress.version;
  // The schedule runs on samples drawn, in global batches of B0; the rule of
  // lr_scaling scales it to this iteration's B (the same on every rank).
  const int64_t b0 = p_.cfg.global_batch;
  const double lr = p_.schedule.at_position(static_cast<double>(samples_before_) / static_cast<double>(b0)) *
                    lr_batch_scale(p_.cfg.lr_scaling, batch_, b0, p_.progress.noise_scale);
  p_.progress.lr = lr;
  p_.progress.lr_iteration = t;
  p_.step.update(batch_, lr, grad_sq);
  return true;
}

}  // namespace tandem
