#include "engine/train/boundary.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>


#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/train/evaluate.hpp"
#include "engine/train/interrupt.hpp"
#include "engine/train/record/run_dir.hpp"
#include "engine/train/record/safetensors.hpp"

namespace tandem {

Boundary::Boundary(const BoundaryParts& parts, const std::string& host, const std::string& device,
                   const std::string& pending, const ClusterStats& cluster)
    : p_(parts), eval_every_(parts.cfg.eval_every > 0 ? parts.cfg.eval_every : parts.per_epoch), host_(host),
      device_(device),
      console_(parts.console, parts.comm, parts.emulator, parts.total, parts.model.targets_per_sample()),
      reports_(static_cast<size_t>(parts.comm.size())), cluster_(cluster),
      length_(run_length(parts.cfg, parts.per_epoch)), adascale_(parts.cfg.adascale_gain()) {
  if (!pending.empty()) std::memcpy(reports_.data(), pending.data(), pending.size());
}

void Boundary::open(int64_t t, const Plan& plan) {
  if (rank0()) console_.serve(t, plan, wall_s(), p_.summary.test_accuracy.value_or(-1.0));
}

void Boundary::stamp(WorkerStats& w, int64_t t) const {
  std::snprintf(w.host, sizeof w.host, "%s", host_.c_str());
  std::snprintf(w.device, sizeof w.device, "%s", device_.c_str());
  w.rank = p_.comm.rank();
  w.valid = 1;
  w.iteration = t;
}

WorkerStats Boundary::begin_stats(int64_t t, int64_t local_batch, double start_ms) const {
  WorkerStats w{};
  stamp(w, t);
  w.local_batch = local_batch;
  w.start_ms = start_ms - p_.timeline.origin();
  return w;
}

// ---- bsp: the decision rides with the gradients --------------------------------

void Boundary::finish_and_submit(int64_t t, double* stats_ms) {
  const double start = now_ms();
  p_.comm.finish_reports("the stats reports");
  *stats_ms += now_ms() - start;
  if (p_.policy && reports_[0].valid) {
    p_.policy->submit(t - 1, reports_, cluster_);
    submitted_ = true;
  }
  if (adascale_ && reports_[0].valid) noise_.observe(reports_, cluster_.global_grad_sq);
}

void Boundary::stats_in(int64_t t, double* stats_ms) {
  submitted_ = false;
  reports_in_ = p_.comm.reports_ready();
  if (reports_in_) finish_and_submit(t, stats_ms);
}

Control Boundary::decide(int64_t t, double* stats_ms) {
  // A rank still on its way (sharing a core, say) was not waited for before the
  // compute; now it is.
  if (!reports_in_) finish_and_submit(t, stats_ms);
  Control c;
  if (!rank0()) return c;
  decision_ = PolicyReport{};
  if (p_.policy && submitted_) {
    c.plan = p_.policy->collect(decision_);
    decision_.applies_from = t + 1;
  }
  record(t - 1);
  decide_common(c, t + 1);
  if (adascale_ && noise_.known()) c.noise_scale = noise_.phi();
  return c;
}

void Boundary::global_gradient(double grad_sq) {
  cluster_ = ClusterStats{};
  cluster_.global_grad_sq = grad_sq;
}

void Boundary::post(const WorkerStats& mine) {
  mine_ = mine;
  const double start = now_ms();
  p_.comm.post_report(&mine_, sizeof mine_, reports_.data());
  post_ms_ = now_ms() - start;
}

// ---- both paths ------------------------------------------------------------------

void Boundary::decide_common(Control& c, int64_t done) {
  c.stop = interrupted() || (p_.cfg.stop.max_seconds && p_.progress.train_ms / 1000.0 >= *p_.cfg.stop.max_seconds);
  console_.write(c);
  c.checkpoint = console_.checkpoint_asked() || (p_.checkpoints.enabled() && p_.checkpoints.due(done, p_.progress.train_ms));
}

void Boundary::record(int64_t iteration, const SyncRecord* sync) {
  if (!p_.recorder || !reports_[0].valid) return;
  // The samples drawn and the learning rate are those after `iteration`'s update
  // (bsp records it during the next iteration, before that one's update).
  p_.recorder->set_samples_drawn(p_.progress.samples_drawn, p_.cfg.global_batch);
  const double lr = p_.progress.lr_iteration == iteration ? p_.progress.lr : p_.schedule.at(iteration);
  p_.recorder->iteration(iteration, lr, reports_, wall_s(), p_.progress.train_ms / 1000.0,
                         p_.policy ? &decision_ : nullptr, sync);
  console_.remember(iteration, reports_, sync ? sync->mode : "", wall_s());
}

// ---- relaxed: the meeting decides --------------------------------------------------

void Boundary::before_segment(int64_t t) {
  p_.comm.finish_reports("the stats reports");
  if (!rank0()) return;
  decision_ = PolicyReport{};
  record(t - 1);
}

SyncRecord Boundary::segment_record(const SegmentResult& seg, const Plan& plan) const {
  SyncRecord rec;
  rec.mode = plan.sync.str();
  rec.groups = plan.sync.group;
  rec.iterations = seg.iterations;
  rec.updates = plan.sync.mode == SyncMode::local ? 1 : seg.server.updates;  // local: one model average
  rec.applied = seg.server.applied;
  rec.dropped = seg.server.dropped;
  rec.staleness_mean = seg.server.applied ? seg.server.staleness_sum / static_cast<double>(seg.server.applied) : 0.0;
  rec.staleness_max = seg.server.staleness_max;
  rec.server_busy_ms = seg.server.busy_ms;
  rec.staleness_histogram = seg.server.staleness_histogram;
  rec.segment_ms = seg.segment_ms;
  return rec;
}

// The policy decides on the segment's stats at once: the next segment runs its plan.
void Boundary::policy_on_segment(const SegmentResult& seg, const Plan& plan, int64_t done, Control& c) {
  decision_ = PolicyReport{};
  if (!p_.policy) return;
  ClusterStats cs;
  cs.sync_mode = static_cast<int32_t>(plan.sync.mode);
  cs.iterations = static_cast<double>(seg.iterations);
  cs.updates = seg.server.updates;
  cs.dropped = seg.server.dropped;
  cs.server_busy_ms = seg.server.busy_ms;
  p_.policy->submit(done - 1, reports_, cs);
  c.plan = p_.policy->collect(decision_);
  decision_.applies_from = done;
}

Control Boundary::exchange(StepResult& r, const Plan& plan) {
  if (!r.segment) return std::move(r.control);
  const SegmentResult& seg = *r.segment;
  WorkerStats mine = seg.stats;
  stamp(mine, r.done - 1);
  mine.sync_mode = static_cast<int32_t>(plan.sync.mode);
  mine.memory_mb = static_cast<double>(p_.model.device().bytes_in_use()) / (1024.0 * 1024.0);
  post(mine);
  p_.comm.finish_reports("the segment's stats");
  Control c;
  if (rank0()) {
    const SyncRecord rec = segment_record(seg, plan);
    policy_on_segment(seg, plan, r.done, c);
    record(r.done - 1, &rec);
    decide_common(c, r.done);
  }
  for (WorkerStats& w : reports_) w.valid = 0;  // recorded: the bsp path must not again
  const ControlWire wire(p_.comm.size());
  std::vector<float> floats(wire.floats());
  wire.encode(c, p_.comm.rank(), floats.data());
  p_.comm.broadcast(floats.data(), floats.size() * sizeof(float), "the meeting's decisions");
  p_.timeline.restart();
  return wire.decode(floats.data());
}

// ---- applying the decisions --------------------------------------------------------

bool Boundary::apply(Control& c, int64_t done, Plan& plan) {
  if (c.plan) {
    const int64_t b = c.plan->global_batch();
    TANDEM_CHECK(b >= p_.cfg.global_batch_min() && b <= p_.cfg.global_batch_max(), "plan ", c.plan->str(),
                 " carries a global batch of ", b, ", outside policy.global_batch [", p_.cfg.global_batch_min(), ", ",
                 p_.cfg.global_batch_max(), "] (a bug in tandem: the policy host checks it)");
    c.plan->validate(p_.comm.size(), b);
    plan = std::move(*c.plan);
  }
  bool stop = c.stop;
  if (console_.apply(c, done, plan, p_.timeline, wall_s(), p_.summary.test_accuracy.value_or(-1.0))) stop = true;
  // With B adaptive, stop.epochs counts samples: the run ends once they are drawn.
  const bool epochs_drawn = p_.cfg.adaptive_batch() && p_.progress.samples_drawn >= length_.epoch_samples;
  const bool last = done >= p_.total || epochs_drawn;
  if (last) record_last(done);  // its progress line before the final evaluation's
  if ((done % eval_every_ == 0 || last) && evaluate(done)) return true;
  if (epochs_drawn) return true;  // (its final checkpoint in finish())
  // (A run that stops here gets its final checkpoint in finish().)
  if (!stop && done < p_.total) checkpoint_if_decided(done, plan, c);
  if (!stop) return false;
  p_.summary.stop_reason = stop_reason();
  if (rank0() && interrupted()) log::warn("interrupted: stopping after iteration {}", done);
  return true;
}

// Mirrors apply() below: each of its actions makes the boundary not quiet.
bool Boundary::quiet(const Control& c, int64_t done) const {
  const bool epochs_drawn = p_.cfg.adaptive_batch() && p_.progress.samples_drawn >= length_.epoch_samples;
  return !c.plan && !c.stop && !c.pause && !c.checkpoint && !c.slowdown && !interrupted() && done < p_.total &&
         done % eval_every_ != 0 && !epochs_drawn;
}

std::string Boundary::stop_reason() const {
  return interrupted() ? "interrupted" : console_.stopped() ? "console" : "max_seconds";
}

bool Boundary::evaluate(int64_t done) {
  const Stopwatch clock;
  const int rank = p_.comm.rank(), world = p_.comm.size();
  const int64_t n = p_.test_set.size();
  if (!test_input_) test_input_ = std::make_unique<DeviceInput>(p_.model.device(), p_.test_set, p_.cfg.data.on_device);
  EvalSums sums = evaluator_.run(p_.model, *test_input_, p_.cfg.eval_batch, n * rank / world, n * (rank + 1) / world);
  p_.comm.allreduce_sum(&sums.loss_sum, 3, "the evaluation sums");
  const double accuracy = sums.correct / sums.count;
  p_.summary.test_accuracy = accuracy;
  p_.summary.best_test_accuracy = std::max(p_.summary.best_test_accuracy.value_or(accuracy), accuracy);
  const double loss = sums.loss_sum / sums.count;  // mean per prediction (per token for a language model)
  p_.summary.test_loss = loss;
  p_.summary.best_test_loss = std::min(p_.summary.best_test_loss.value_or(loss), loss);
  if (p_.recorder)
    p_.recorder->eval({done, p_.progress.epochs(p_.per_epoch, p_.cfg.global_batch), loss,
                     accuracy, clock.elapsed_ms(), p_.progress.train_ms / 1000.0});
  p_.timeline.restart();  // evaluations are not training time
  const StopConfig& stop = p_.cfg.stop;
  const bool accuracy_reached = stop.target_accuracy && accuracy >= *stop.target_accuracy;
  const bool loss_reached = stop.target_loss && loss <= *stop.target_loss;
  if (!accuracy_reached && !loss_reached) return false;
  if (!p_.summary.time_to_target_s) p_.summary.time_to_target_s = p_.progress.train_ms / 1000.0;
  p_.summary.stop_reason = accuracy_reached ? "target_accuracy" : "target_loss";
  return true;
}

// Rank 0 writes; every rank waits for it (another rank with a fault "during
// checkpoint" dies meanwhile). The wait's deadline allows 50 MB/s for the write on
// top of collective_timeout_s: a big model on a slow disk is not a dead worker.
void Boundary::checkpoint_if_decided(int64_t done, const Plan& in_force, const Control& c) {
  if (!c.checkpoint) return;
  console_.checkpoint_written();
  if (rank0())
    write_checkpoint(done, in_force);
  else
    p_.faults.at(done - 1, "checkpoint");
  const double timeout = p_.comm.timeout_s();
  p_.comm.set_timeout_s(timeout + static_cast<double>(p_.checkpoints.bytes()) / 50e6);
  // An arrival rather than a plain barrier: past the deadline it names who is missing.
  float arrived = 1.0f;
  double waited_ms = 0.0;
  p_.comm.arrive_and_allreduce(&arrived, 1, &waited_ms, "waiting for rank 0 to write a checkpoint");
  p_.comm.set_timeout_s(timeout);
  p_.timeline.restart();  // writing a checkpoint is not training time
}

// Rank 0: a checkpoint after `done` iterations, in_force the plan of the next one
// (fault injection may end this rank half-way through the file).
void Boundary::write_checkpoint(int64_t done, const Plan& in_force) {
  CheckpointState s;
  s.iteration = done;
  s.world = p_.comm.size();
  s.seed = p_.cfg.seed;
  s.experiment = p_.cfg.name;
  s.plan = in_force;
  // The stats of the iteration just run, recorded during the next one: pending.
  p_.comm.finish_reports("the stats reports, for a checkpoint");
  if (reports_[0].valid) {
    s.pending_stats.assign(reinterpret_cast<const char*>(reports_.data()), reports_.size() * sizeof(WorkerStats));
    s.stats_record = sizeof(WorkerStats);
  }
  if (p_.policy) {
    s.policy = p_.policy->name();
    s.policy_state = p_.policy->saved_state();
    s.policy_window = p_.policy->saved_window();
    s.cluster_stats.assign(reinterpret_cast<const char*>(&cluster_), sizeof cluster_);
  }
  s.train_ms = p_.progress.train_ms;
  s.samples = p_.progress.samples;
  s.samples_drawn = p_.progress.samples_drawn;
  s.sample_cursor = p_.progress.sample_cursor;
  s.noise_scale = p_.progress.noise_scale;
  if (adascale_) s.noise_state = noise_.state();
  s.version = p_.progress.version;
  s.skipped_steps = p_.progress.skipped_steps;
  s.test_accuracy = p_.summary.test_accuracy.value_or(0.0);  // the file's 0: none yet
  s.best_test_accuracy = p_.summary.best_test_accuracy.value_or(0.0);
  s.time_to_target_s = p_.summary.time_to_target_s;
  const Stopwatch took;
  p_.checkpoints.write(s, [&] { p_.faults.at(done - 1, "checkpoint"); });
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(checkpoint_path(p_.summary.run_dir, done), ec);
  log::debug("checkpoint after iteration {}: {:.2f} MB written in {:.0f} ms (training stood still meanwhile)",
                done, ec ? 0.0 : static_cast<double>(bytes) / (1 << 20), took.elapsed_ms());
}

// ---- the end -----------------------------------------------------------------------

// The last iteration's stats, decided on by no one (once: a second call finds them
// recorded).
void Boundary::record_last(int64_t done) {
  p_.comm.finish_reports("the final stats reports");
  decision_ = PolicyReport{};
  record(done - 1);
  for (WorkerStats& w : reports_) w.valid = 0;  // recorded: nothing pending for a resumed run
}

RunSummary Boundary::finish(int64_t done, const Plan& plan) {
  record_last(done);
  if (rank0() && ((p_.checkpoints.enabled() && p_.cfg.checkpoint.final) || console_.checkpoint_pending()) &&
      p_.checkpoints.last_iteration() != done)
    write_checkpoint(done, plan);
  RunSummary& s = p_.summary;
  s.skipped_steps = p_.progress.skipped_steps;
  // (>=: a relaxed-sync segment's in-flight updates may carry it a little past.)
  if (s.stop_reason == "epochs" && p_.cfg.stop.max_iterations && done >= *p_.cfg.stop.max_iterations &&
      done < length_.epoch_iterations)
    s.stop_reason = "max_iterations";
  s.iterations = done;
  s.epochs = p_.progress.epochs(p_.per_epoch, p_.cfg.global_batch);
  s.train_s = p_.progress.train_ms / 1000.0;
  s.samples_per_s = p_.progress.train_ms > 0 ? static_cast<double>(p_.progress.samples) / s.train_s : 0.0;
  s.wall_s = wall_s();
  rusage self{};
  if (::getrusage(RUSAGE_SELF, &self) == 0) s.rank0_peak_rss_mb = static_cast<double>(self.ru_maxrss) / 1024.0;  // kB
  if (!p_.recorder) return s;
  if (p_.cfg.save_params) {
    const std::vector<float> params = p_.model.params().to_host();
    write_binary_file(s.run_dir + "/params.f32", params.data(), params.size() * sizeof(float));
    export_safetensors(s.run_dir + "/params.safetensors", p_.cfg.model, p_.model, params, done);
  }
  p_.recorder->finish(s, p_.cfg);
  log::end_progress();  // a terminal's bar stays above the final line
  // A language model's result is its validation loss; a classifier's its accuracy.
  const std::string result = p_.model.targets_per_sample() > 1 && s.test_loss ? fmt::format("validation loss {:.4f}", *s.test_loss)
                             : s.test_accuracy ? fmt::format("test accuracy {:.4f}", *s.test_accuracy)
                                               : std::string("not evaluated");
  console_.finished(fmt::format("run finished ({}) after {} iterations, {}", s.stop_reason, s.iterations, result));
  log::info("done ({}): {} iterations, {}, {:.0f} samples/s, {:.1f} s, rank 0 peak RSS "
               "{:.0f} MB{}", s.stop_reason, s.iterations, result, s.samples_per_s, s.wall_s,
               s.rank0_peak_rss_mb,
               s.time_to_target_s ? fmt::format(", target reached after {:.1f} s of training", *s.time_to_target_s)
                                  : std::string());
  return s;
}

}  // namespace tandem
