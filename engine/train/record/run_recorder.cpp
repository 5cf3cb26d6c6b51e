#include "engine/train/record/run_recorder.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/train/record/run_dir.hpp"

namespace tandem {

RunRecorder::RunRecorder(const ExperimentConfig& cfg, const std::string& run_dir, int workers, int64_t per_epoch,
                         int64_t total, int64_t resume_at, int64_t rerecord_from)
    : workers_(workers), per_epoch_(per_epoch), total_(total), log_every_(cfg.log_every),
      byte_tokens_(cfg.data.name == "text"),
      trace_(run_dir + "/trace.jsonl", resume_at, rerecord_from), chrome_(run_dir + "/trace.perfetto.json", workers),
      w_compute_(static_cast<size_t>(workers)), w_idle_(static_cast<size_t>(workers)),
      w_comm_(static_cast<size_t>(workers)) {
  if (cfg.tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir, log_every_, total, resume_at < 0);
}

void RunRecorder::iteration(int64_t t, double lr, const std::vector<WorkerStats>& workers, double wall_s,
                            const PolicyReport* policy, const SyncRecord* sync) {
  IterationRecord rec;
  rec.iteration = t;
  rec.epoch = t / per_epoch_;
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
    if (w.step_ms > 0) {
      comm_share_sum_ += w.comm_ms / w.step_ms / static_cast<double>(workers_);
      idle_share_sum_ += w.idle_ms / w.step_ms / static_cast<double>(workers_);
    }
    chrome_.add(w);
  }
  stats_ms_ += stats_ms;
  rec.loss = loss_sum / static_cast<double>(std::max<int64_t>(rec.global_batch * targets_, 1));
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
  if (policy) record_policy(t, *policy);
  plan_.local_batch.resize(workers.size());
  for (size_t r = 0; r < workers.size(); ++r) plan_.local_batch[r] = workers[r].local_batch;

  w_loss_ += loss_sum;
  w_samples_ += rec.global_batch;
  w_correct_ += rec.correct;
  w_step_ms_ += rec.step_ms;
  ++w_iters_;
  ++iterations_;
  if ((t + 1) % log_every_ == 0 || t + 1 == total_) progress(t, lr);
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
    spdlog::debug("iteration {}: policy {} plans {}{} from iteration {}{}{}", t, p.policy, Plan{p.plan, {}}.str(),
                  p.sync.empty() || p.sync == "bsp" ? "" : " " + p.sync,
                  p.applies_from, p.reason.empty() ? "" : ": ", clipped_reason(p.reason));
  }
  if (p.event == "swapped") ++s.swaps;
  if (p.failed || p.event == "hung") ++s.failures;
  s.last_event = p.event;
}

void RunRecorder::progress(int64_t t, double lr) {
  trace_.flush();
  chrome_.flush();
  const int64_t predictions = std::max<int64_t>(w_samples_ * targets_, 1);
  last_loss_ = w_loss_ / static_cast<double>(predictions);
  const double samples_per_s = static_cast<double>(w_samples_) / (w_step_ms_ / 1000.0);
  std::string balance;
  if (workers_ > 1) {
    const auto [lo, hi] = std::minmax_element(w_compute_.begin(), w_compute_.end());
    double idle = 0.0, comm = 0.0;
    for (int r = 0; r < workers_; ++r) {
      idle += w_idle_[static_cast<size_t>(r)];
      comm += w_comm_[static_cast<size_t>(r)];
    }
    const double n = static_cast<double>(w_iters_), step = w_step_ms_ / n;
    balance = fmt::format(" | compute ms min {:.1f} (r{}) max {:.1f} (r{}), idle {:.0f}%, comm {:.0f}%", *lo / n,
                          lo - w_compute_.begin(), *hi / n, hi - w_compute_.begin(),
                          100.0 * idle / n / workers_ / step, 100.0 * comm / n / workers_ / step);
    if (policy_.calls > 0) {
      balance += fmt::format(" | policy {}: {} plan change(s){}", policy_.name, policy_.w_plans,
                             workers_ <= 8 ? ", now " + plan_.str() : std::string());
      policy_.w_plans = 0;
    }
  }
  const std::string tokens_per_s =
      targets_ > 1 ? fmt::format(" ({:.0f} tokens/s)", samples_per_s * static_cast<double>(targets_)) : "";
  spdlog::info("epoch {:>3} iter {:>7}/{} loss {:.4f} train acc {:.3f} lr {:.4g} {:.0f} samples/s{}{}",
               t / per_epoch_ + 1, t + 1, total_, last_loss_,
               static_cast<double>(w_correct_) / static_cast<double>(predictions), lr, samples_per_s,
               tokens_per_s, balance);
  w_loss_ = w_step_ms_ = 0.0;
  w_samples_ = w_correct_ = w_iters_ = 0;
  std::fill(w_compute_.begin(), w_compute_.end(), 0.0);
  std::fill(w_idle_.begin(), w_idle_.end(), 0.0);
  std::fill(w_comm_.begin(), w_comm_.end(), 0.0);
}

void RunRecorder::eval(const EvalRecord& r) {
  trace_.write(r);
  if (tensorboard_) tensorboard_->eval(r);
  trace_.flush();
  chrome_.flush();
  if (byte_tokens_)
    spdlog::info("epoch {:.2f} iter {} validation loss {:.4f} ({:.3f} bits/byte) token accuracy {:.4f} (eval {:.0f} "
                 "ms)", r.epoch, r.iteration, r.test_loss, r.test_loss / std::log(2.0), r.test_accuracy, r.eval_ms);
  else
    spdlog::info("epoch {:.2f} iter {} test loss {:.4f} test accuracy {:.4f} (eval {:.0f} ms)", r.epoch,
                 r.iteration, r.test_loss, r.test_accuracy, r.eval_ms);
}

void RunRecorder::finish(RunSummary& s, const ExperimentConfig& cfg) {
  trace_.flush();
  const double n = static_cast<double>(std::max<int64_t>(iterations_, 1));
  s.final_loss = w_samples_ > 0 ? w_loss_ / static_cast<double>(w_samples_ * targets_) : last_loss_;
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
  j["final_loss"] = s.final_loss;
  j["test_accuracy"] = s.test_accuracy;
  j["best_test_accuracy"] = s.best_test_accuracy;
  j["target_accuracy"] = cfg.stop.target_accuracy ? nlohmann::json(*cfg.stop.target_accuracy) : nlohmann::json();
  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
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
