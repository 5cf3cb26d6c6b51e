#pragma once
// Rank 0's bookkeeping of a run: the trace (JSON lines + Chrome/Perfetto events),
// progress lines with the workers' balance, and summary.json. Kept apart from the
// training loop so the loop reads as the data flow of one iteration.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/train/config.hpp"
#include "engine/train/plan.hpp"
#include "engine/train/record/tensorboard.hpp"
#include "engine/train/record/trace.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

struct RunSummary {
  std::string run_dir;
  std::string stop_reason;  // epochs | target_accuracy | target_loss | max_iterations | max_seconds | interrupted
  int workers = 1;
  int64_t iterations = 0;
  double epochs = 0.0;
  // Mean training loss over the last logging window; unset where nothing was trained
  // (tandem sim).
  std::optional<double> final_loss;
  // The last and the best test accuracy; unset (null in summary.json, "not
  // evaluated" in the final line) until an evaluation ran.
  std::optional<double> test_accuracy, best_test_accuracy;
  // Test (validation) loss, mean per prediction: the last and the lowest; unset until
  // an evaluation ran.
  std::optional<double> test_loss, best_test_loss;
  double samples_per_s = 0.0;  // training samples / training time (evaluations excluded)
  double train_s = 0.0;        // training time, evaluations excluded
  double wall_s = 0.0;         // whole run, set-up and evaluations included
  std::optional<double> time_to_target_s;  // training time until the target was first reached
  int64_t parameters = 0;
  double comm_share = 0.0;  // mean over workers of comm_ms / step_ms
  double idle_share = 0.0;  // mean over workers of idle_ms / step_ms
  // Mean cost per iteration of gathering the stats at rank 0: the largest time a
  // rank spent posting and completing its report.
  double stats_ms = 0.0;
  int64_t skipped_steps = 0;  // steps skipped for a NaN or Inf loss or gradient
  // Rank 0's peak resident set (getrusage's ru_maxrss) at the end; 0 where no rank ran
  // (tandem sim). What a policy does in its worker process never counts here.
  double rank0_peak_rss_mb = 0.0;
};

class RunRecorder {
public:
  // resume_at >= 0: a resumed run continuing at that iteration (the trace keeps what
  // came before it; the Perfetto file starts again).
  // rerecord_from: the first iteration it will record (resume_at - 1 when the
  // checkpoint's pending stats are recorded again).
  RunRecorder(const ExperimentConfig& cfg, const std::string& run_dir, int workers, int64_t per_epoch,
              int64_t total, int64_t resume_at = -1, int64_t rerecord_from = -1);
  // One finished iteration with every worker's stats (indexed by rank). wall_s: since
  // the run started; train_s: training time so far (tandem sim: both its clock).
  // policy: the policy's decision broadcast in iteration t, when a policy runs.
  // sync: a relaxed-sync segment's record (its stats are means per step).
  void iteration(int64_t t, double lr, const std::vector<WorkerStats>& workers, double wall_s, double train_s,
                 const PolicyReport* policy = nullptr, const SyncRecord* sync = nullptr);
  void eval(const EvalRecord& r);
  // The samples drawn through the next iteration() (its global batch included), so
  // that epochs count samples when B changes: epoch = samples / (per_epoch * B0).
  // Not called (tandem sim with a fixed B): epochs count iterations.
  void set_samples_drawn(int64_t samples, int64_t base_batch) {
    samples_drawn_ = samples;
    base_batch_ = base_batch;
  }
  // Predictions per sample (Model::targets_per_sample): a language model's loss and
  // accuracy are per token, and its throughput is also shown in tokens/s.
  void set_targets_per_sample(int64_t targets) { targets_ = targets > 0 ? targets : 1; }
  // A policy decision of an iteration the trace leaves out (tandem sim's
  // sim.trace_every): counted in the summary all the same.
  void untraced_decision(int64_t t, const PolicyReport& p) { record_policy(t, p); }
  // tandem sim: nothing is trained, so the lines have no loss, accuracy or learning
  // rate, and the summary's final_loss is null.
  void set_simulated() { simulated_ = true; }
  // Plans the policy decided (summary.json's policy.plan_changes).
  int64_t plans_decided() const { return policy_.plans; }
  // Finishes the summary's averages and writes summary.json.
  void finish(RunSummary& s, const ExperimentConfig& cfg);

private:
  void progress(int64_t t, double lr, double wall_s, double train_s);
  void balance();
  void log_decision(int64_t t, const PolicyReport& p) const;
  // Relaxed-sync totals over the run, for the summary.
  struct SyncTotals {
    int64_t segments = 0, iterations = 0, updates = 0, applied = 0, dropped = 0;
    double staleness_sum = 0.0, staleness_max = 0.0, server_busy_ms = 0.0, segment_ms = 0.0;
    std::vector<int64_t> staleness_histogram;
  } sync_;
  int workers_;
  const StopConfig stop_;
  int64_t per_epoch_, total_, log_every_, targets_ = 1;
  int64_t samples_drawn_ = -1, base_batch_ = 1;  // set_samples_drawn; -1: epochs by iterations
  double epoch_after(int64_t t) const {
    return samples_drawn_ >= 0 ? static_cast<double>(samples_drawn_) / static_cast<double>(per_epoch_ * base_batch_)
                               : static_cast<double>(t + 1) / static_cast<double>(per_epoch_);
  }
  bool byte_tokens_;  // the text data set: a token is a byte, so loss / ln 2 is bits per byte
  bool tokens_;       // the tokens data set: a validation loss per token, not a test set's
  bool simulated_ = false;
  // The first recorded iteration and when: the wall-clock cost of an iteration since.
  int64_t first_t_ = -1;
  double first_wall_s_ = 0.0;
  TraceWriter trace_;
  ChromeTrace chrome_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // when the experiment asks for it
  // The progress window since the last progress line.
  double w_loss_ = 0.0, w_step_ms_ = 0.0;
  int64_t w_samples_ = 0, w_correct_ = 0, w_iters_ = 0;
  std::vector<double> w_compute_, w_idle_, w_comm_, w_data_;
  // The last two recorded iterations' batches and compute times: what a decision
  // was taken on, for its debug line.
  struct Seen {
    int64_t iteration = -1;
    std::vector<int64_t> batch;
    std::vector<double> compute_ms;
  } seen_[2];
  // Whole-run sums for the summary.
  double comm_share_sum_ = 0.0, idle_share_sum_ = 0.0, stats_ms_ = 0.0, last_loss_ = 0.0;
  int64_t iterations_ = 0;
  // The policy's decisions: counts by event, cost and waiting.
  struct PolicyTotals {
    std::string name;
    int64_t calls = 0, plans = 0, failures = 0, swaps = 0, w_plans = 0;
    double cost_ms = 0.0, max_cost_ms = 0.0, wait_ms = 0.0, max_wait_ms = 0.0;
    std::string last_event;
  } policy_;
  Plan plan_;  // the local batches of the latest recorded iteration
  void record_policy(int64_t t, const PolicyReport& p);
  void remember(const std::vector<WorkerStats>& workers);
};

}  // namespace tandem
