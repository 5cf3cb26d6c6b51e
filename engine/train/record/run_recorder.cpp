#include "engine/train/record/run_recorder.hpp"


#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include <fmt/ranges.h>

#include "engine/core/log.hpp"
#include "engine/train/record/progress_line.hpp"
#include "engine/train/record/run_dir.hpp"

namespace tandem {

RunRecorder::RunRecorder(const ExperimentConfig& cfg, const std::string& run_dir, int workers, int64_t per_epoch,
                         int64_t total, int64_t resume_at, int64_t rerecord_from)
    : workers_(workers), stop_(cfg.stop), per_epoch_(per_epoch), total_(total), log_every_(cfg.log_every),
      byte_tokens_(cfg.data.name == "text"), tokens_(cfg.data.name == "tokens"),
      trace_(run_dir + "/trace.jsonl", resume_at, rerecord_from), chrome_(run_dir + "/trace.perfetto.json", workers),
      w_compute_(static_cast<size_t>(workers)), w_idle_(static_cast<size_t>(workers)),
      w_comm_(static_cast<size_t>(workers)), w_data_(static_cast<size_t>(workers)) {
  if (cfg.tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir, log_every_, total, resume_at < 0);
}

void RunRecorder::iteration(int64_t t, double lr, const std::vector<WorkerStats>& workers, double wall_s,
                            double train_s, const PolicyReport* policy, const SyncRecord* sync) {
  if (first_t_ < 0) {
    first_t_ = t;
    first_wall_s_ = wall_s;
  }
  IterationRecord rec;
  rec.iteration = t;
  rec.epoch = epoch_after(t);  // completed after it
  rec.lr = lr;
  double loss_sum = 0.0, stats_ms = 0.0;
  for (const WorkerStats& w : workers) {
    stats_ms = std::max(stats_ms, w.stats_ms);
    rec.global_batch += w.local_batch;
    loss_sum += w.loss_sum;
    rec.correct += w.correct;
    rec.step_ms = std::max(rec.step_ms, w.step_ms);
    const size_t r = static_cast<size_t>(w.rank);
    w_compute_[r] += w.compute_ms;
    w_idle_[r] += w.idle_ms;
    w_comm_[r] += w.comm_ms;
    w_data_[r] += w.data_ms;
    if (w.step_ms > 0) {
      comm_share_sum_ += w.comm_ms / w.step_ms / static_cast<double>(workers_);
      idle_share_sum_ += w.idle_ms / w.step_ms / static_cast<double>(workers_);
    }
    chrome_.add(w);
  }
  stats_ms_ += stats_ms;
  rec.loss = loss_sum / static_cast<double>(std::max<int64_t>(rec.global_batch * targets_, 1));
  if (simulated_) rec.loss = rec.lr = std::numeric_limits<double>::quiet_NaN();  // nothing trained
  rec.wall_s = wall_s;
  trace_.write(rec, workers, policy, sync);
  if (tensorboard_) tensorboard_->iteration(rec, workers, sync, targets_);
  if (sync) {
    ++sync_.segments;
    sync_.iterations += sync->iterations;
    sync_.updates += sync->updates;
    sync_.applied += sync->applied;
    sync_.dropped += sync->dropped;
    sync_.staleness_sum += sync->staleness_mean * static_cast<double>(sync->applied);
    sync_.staleness_max = std::max(sync_.staleness_max, sync->staleness_max);
    sync_.server_busy_ms += sync->server_busy_ms;
    sync_.segment_ms += sync->segment_ms;
    auto& h = sync_.staleness_histogram;
    if (h.size() < sync->staleness_histogram.size()) h.resize(sync->staleness_histogram.size(), 0);
    for (size_t i = 0; i < sync->staleness_histogram.size(); ++i) h[i] += sync->staleness_histogram[i];
  }
  remember(workers);
  if (policy) record_policy(t, *policy);

  w_loss_ += loss_sum;
  w_samples_ += rec.global_batch;
  w_correct_ += rec.correct;
  w_step_ms_ += rec.step_ms;
  ++w_iters_;
  ++iterations_;
  if ((t + 1) % log_every_ == 0 || t + 1 == total_) progress(t, lr, wall_s, train_s);
}

void RunRecorder::remember(const std::vector<WorkerStats>& workers) {
  if (log::should_log(log::Level::debug)) {
    seen_[0] = std::move(seen_[1]);
    seen_[1].iteration = workers.empty() ? -1 : workers[0].iteration;
    seen_[1].batch.resize(workers.size());
    seen_[1].compute_ms.resize(workers.size());
    for (size_t r = 0; r < workers.size(); ++r) {
      seen_[1].batch[r] = workers[r].local_batch;
      seen_[1].compute_ms[r] = workers[r].compute_ms;
    }
  }
  plan_.local_batch.resize(workers.size());
  for (size_t r = 0; r < workers.size(); ++r) plan_.local_batch[r] = workers[r].local_batch;
}

void RunRecorder::record_policy(int64_t t, const PolicyReport& p) {
  if (p.event == "idle") return;
  PolicyTotals& s = policy_;
  if (p.event == "late") {  // no decision yet: only training's wait for it counts
    s.wait_ms += p.wait_ms;
    s.max_wait_ms = std::max(s.max_wait_ms, p.wait_ms);
    s.last_event = p.event;
    return;
  }
  s.name = p.policy;
  ++s.calls;
  s.cost_ms += p.cost_ms;
  s.max_cost_ms = std::max(s.max_cost_ms, p.cost_ms);
  s.wait_ms += p.wait_ms;
  s.max_wait_ms = std::max(s.max_wait_ms, p.wait_ms);
  if (!p.plan.empty()) {
    ++s.plans;
    ++s.w_plans;
    log_decision(t, p);
  }
  if (p.event == "swapped") ++s.swaps;
  if (p.failed || p.event == "hung") ++s.failures;
  s.last_event = p.event;
}

// A plan decided, with what it was decided on: the batches and compute times the
// policy saw (the stats of this iteration or the one before, as they were recorded).
void RunRecorder::log_decision(int64_t t, const PolicyReport& p) const {
  if (!log::should_log(log::Level::debug)) return;
  std::string inputs;
  for (const Seen& seen : seen_)
    if (seen.iteration == p.from_iteration && !seen.compute_ms.empty())
      inputs = fmt::format(" on iteration {}'s batches {} and compute ms [{:.2f}]", p.from_iteration,
                           Plan{seen.batch, {}}.str(), fmt::join(seen.compute_ms, ", "));
  log::debug("iteration {}: policy {} decided{}: plan {}{} from iteration {} (its call took {:.2f} ms){}{}", t,
                p.policy, inputs, Plan{p.plan, {}}.str(), p.sync.empty() || p.sync == "bsp" ? "" : " " + p.sync,
                p.applies_from, p.cost_ms, p.reason.empty() ? "" : ": ", clipped_reason(p.reason));
}

void RunRecorder::progress(int64_t t, double lr, double wall_s, double train_s) {
  trace_.flush();
  chrome_.flush();
  const int64_t predictions = std::max<int64_t>(w_samples_ * targets_, 1);
  last_loss_ = w_loss_ / static_cast<double>(predictions);
  const double samples_per_s = static_cast<double>(w_samples_) / (w_step_ms_ / 1000.0);
  ProgressView v;
  v.elapsed_s = wall_s;
  const double s_per_iteration = t > first_t_ ? (wall_s - first_wall_s_) / static_cast<double>(t - first_t_) : 0.0;
  v.estimate = estimate_stop(stop_, t + 1, total_, train_s, s_per_iteration);
  v.epochs = epoch_after(t);
  v.done = t + 1;
  v.total = total_;
  if (!simulated_) {
    v.loss = last_loss_;
    v.train_accuracy = static_cast<double>(w_correct_) / static_cast<double>(predictions);
    v.lr = lr;
  }
  v.samples_per_s = samples_per_s;
  if (targets_ > 1) v.tokens_per_s = samples_per_s * static_cast<double>(targets_);
  log::progress(progress_line(v), v.estimate.fraction);
  if (workers_ > 1) balance();
  w_loss_ = w_step_ms_ = 0.0;
  w_samples_ = w_correct_ = w_iters_ = 0;
  for (auto* sums : {&w_compute_, &w_idle_, &w_comm_, &w_data_}) std::fill(sums->begin(), sums->end(), 0.0);
}

// The workers' balance over the window (progress_line.hpp), and at debug level every
// worker's times, the data loader's among them.
void RunRecorder::balance() {
  const double n = static_cast<double>(w_iters_), step = w_step_ms_ / n;
  BalanceView b;
  b.local_batch = plan_.local_batch;
  b.compute_ms.resize(w_compute_.size());
  for (size_t r = 0; r < w_compute_.size(); ++r) {
    b.compute_ms[r] = w_compute_[r] / n;
    b.idle_share += w_idle_[r] / n / workers_ / step;
    b.comm_share += w_comm_[r] / n / workers_ / step;
  }
  if (policy_.calls > 0) {
    b.policy = policy_.name;
    b.plans = policy_.w_plans;
    policy_.w_plans = 0;
  }
  log::info("{}", balance_line(b));
  if (!log::should_log(log::Level::debug)) return;
  for (size_t r = 0; r < w_compute_.size(); ++r)
    log::debug("  r{}: batch {}, per iteration: data {:.2f} ms, compute {:.2f} ms, idle {:.2f} ms, comm {:.2f} ms",
                  r, plan_.local_batch[r], w_data_[r] / n, w_compute_[r] / n, w_idle_[r] / n, w_comm_[r] / n);
}

void RunRecorder::eval(const EvalRecord& r) {
  trace_.write(r);
  if (tensorboard_) tensorboard_->eval(r);
  trace_.flush();
  chrome_.flush();
  if (byte_tokens_)
    log::info("epoch {:.2f} iter {} validation loss {:.4f} ({:.3f} bits/byte) token accuracy {:.4f} (eval {:.0f} "
                 "ms)", r.epoch, r.iteration, r.test_loss, r.test_loss / std::log(2.0), r.test_accuracy, r.eval_ms);
  else if (tokens_)
    log::info("epoch {:.2f} iter {} validation loss {:.4f} token accuracy {:.4f} (eval {:.0f} ms)", r.epoch,
              r.iteration, r.test_loss, r.test_accuracy, r.eval_ms);
  else
    log::info("epoch {:.2f} iter {} test loss {:.4f} test accuracy {:.4f} (eval {:.0f} ms)", r.epoch,
                 r.iteration, r.test_loss, r.test_accuracy, r.eval_ms);
}

void RunRecorder::finish(RunSummary& s, const ExperimentConfig& cfg) {
  trace_.flush();
  const double n = static_cast<double>(std::max<int64_t>(iterations_, 1));
  if (!simulated_) s.final_loss = w_samples_ > 0 ? w_loss_ / static_cast<double>(w_samples_ * targets_) : last_loss_;
  s.comm_share = comm_share_sum_ / n;
  s.idle_share = idle_share_sum_ / n;
  s.stats_ms = stats_ms_ / n;
  nlohmann::json j;
  j["experiment"] = cfg.name;
  j["stop_reason"] = s.stop_reason;
  j["workers"] = s.workers;
  j["iterations"] = s.iterations;
  j["epochs"] = s.epochs;
  j["global_batch"] = cfg.global_batch;
  j["parameters"] = s.parameters;
  // A number never measured is null, not 0: a run stopped before its first
  // evaluation, and tandem sim, which trains nothing.
  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  j["final_loss"] = optional(s.final_loss);
  j["test_accuracy"] = optional(s.test_accuracy);
  j["best_test_accuracy"] = optional(s.best_test_accuracy);
  j["target_accuracy"] = optional(cfg.stop.target_accuracy);
  j["test_loss"] = optional(s.test_loss);
  j["best_test_loss"] = optional(s.best_test_loss);
  j["target_loss"] = optional(cfg.stop.target_loss);
  if (byte_tokens_)
    j["test_bits_per_byte"] = s.test_loss ? nlohmann::json(*s.test_loss / std::log(2.0)) : nlohmann::json();
  if (targets_ > 1) j["tokens_per_s"] = s.samples_per_s * static_cast<double>(targets_);
  j["samples_per_s"] = s.samples_per_s;
  j["train_s"] = s.train_s;
  j["wall_s"] = s.wall_s;
  j["time_to_target_s"] = s.time_to_target_s ? nlohmann::json(*s.time_to_target_s) : nlohmann::json();
  j["comm_share"] = s.comm_share;
  j["idle_share"] = s.idle_share;
  j["stats_ms_per_iteration"] = s.stats_ms;
  j["skipped_steps"] = s.skipped_steps;
  if (s.rank0_peak_rss_mb > 0) j["rank0_peak_rss_mb"] = s.rank0_peak_rss_mb;
  if (policy_.calls > 0) {
    const double calls = static_cast<double>(policy_.calls);
    j["policy"] = {{"name", policy_.name},
                   {"decisions", policy_.calls},
                   {"plan_changes", policy_.plans},
                   {"failures", policy_.failures},
                   {"swaps", policy_.swaps},
                   {"last_event", policy_.last_event},
                   {"cost_ms_mean", policy_.cost_ms / calls},
                   {"cost_ms_max", policy_.max_cost_ms},
                   {"wait_ms_mean", policy_.wait_ms / calls},
                   {"wait_ms_max", policy_.max_wait_ms}};
  }
  if (sync_.segments > 0) {
    const double seconds = sync_.segment_ms / 1000.0;
    j["sync"] = {{"segments", sync_.segments},
                 {"iterations", sync_.iterations},
                 {"updates", sync_.updates},
                 {"gradients_applied", sync_.applied},
                 {"gradients_dropped", sync_.dropped},
                 {"staleness_mean", sync_.applied ? sync_.staleness_sum / static_cast<double>(sync_.applied) : 0.0},
                 {"staleness_max", sync_.staleness_max},
                 {"staleness_histogram", sync_.staleness_histogram},
                 {"updates_per_s", seconds > 0 ? static_cast<double>(sync_.updates) / seconds : 0.0},
                 {"server_busy_share", sync_.segment_ms > 0 ? sync_.server_busy_ms / sync_.segment_ms : 0.0}};
  }
  write_text_file(s.run_dir + "/summary.json", j.dump(2) + "\n");
}

}  // namespace tandem
