#include "engine/sim/simulator.hpp"


#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/sim/batch_tally.hpp"
#include "engine/sim/compute_model.hpp"
#include "engine/sim/gradient_model.hpp"
#include "engine/sim/network_model.hpp"
#include "engine/sim/segment_model.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/run_length.hpp"
#include "engine/train/plan.hpp"
#include "engine/train/record/run_dir.hpp"

namespace tandem {

namespace {

int checked_workers(const ExperimentConfig& cfg) {
  TANDEM_CHECK_HINT(cfg.workers >= 1, "set workers >= 1", "a simulated cluster of ", cfg.workers, " workers");
  return cfg.workers;
}

// The summary of a run about to start, its run directory made and the config in it.
SimSummary start_summary(const ExperimentConfig& cfg, size_t param_count) {
  SimSummary out;
  out.run.workers = cfg.workers;
  out.run.parameters = static_cast<int64_t>(param_count);
  out.run.run_dir = make_run_dir(cfg.out_dir, cfg.name);
  write_text_file(out.run.run_dir + "/config.json", cfg.resolved_json.empty() ? "{}\n" : cfg.resolved_json + "\n");
  return out;
}

// One simulated run: the cluster's models, the plan in force and the one decided
// for later, the simulated clock and the record.
class Simulator {
public:
  Simulator(const ExperimentConfig& cfg, const DeviceProfile& machine, const GradientLayout& layout,
            int64_t per_epoch, PlanPolicy* policy);
  SimSummary run();

private:
  void adopt_pending_plan();
  PolicyReport decide_on_last(int64_t t);
  void step(int64_t t);
  void record(int64_t t, const PolicyReport& decision);
  int64_t run_segment(int64_t t);
  // `count` iterations of the plan in force drawn: the samples and the tally.
  void drew(int64_t count);
  // With B adaptive, stop.epochs counts samples: the run ends once they are drawn.
  bool epochs_drawn() const { return cfg_.adaptive_batch() && tally_.samples >= epoch_samples_; }
  void finish();
  std::string batch_text() const;
  void write_sim_summary() const;

  const ExperimentConfig& cfg_;
  const Stopwatch wall_;
  const int n_;
  const int64_t per_epoch_, total_, epoch_samples_;
  PlanPolicy* policy_;
  Emulator emulator_;
  ComputeModel compute_;
  NetworkModel network_;
  SegmentModel segments_;
  GradientModel gradients_;
  Plan plan_;
  SimSummary out_;
  RunRecorder recorder_;
  std::vector<WorkerStats> now_, last_;
  ClusterStats now_cluster_, last_cluster_;  // beside now_ and last_: the all-reduced gradient's norm
  std::optional<Plan> pending_;  // decided during t, in force from t+1
  double clock_ms_ = 0.0;
  BatchTally tally_;  // the iterations drawn so far, by their global batch
  int64_t ideal_batch_ = -1;  // the global batch ideal_ was computed for
  double ideal_ = 0.0;
};

Simulator::Simulator(const ExperimentConfig& cfg, const DeviceProfile& machine, const GradientLayout& layout,
                     int64_t per_epoch, PlanPolicy* policy)
    : cfg_(cfg), n_(checked_workers(cfg)), per_epoch_(per_epoch), total_(run_length(cfg, per_epoch).max_iterations),
      epoch_samples_(run_length(cfg, per_epoch).epoch_samples), policy_(policy), emulator_(cfg.emulation, n_),
      compute_(cfg.sim, emulator_, machine), network_(cfg.sim, cfg.comm, emulator_, n_, layout),
      segments_(compute_, network_), gradients_(cfg.sim, per_epoch, cfg.global_batch),
      plan_(Plan::initial(cfg, n_, [&](const std::vector<int64_t>& b) { return emulator_.throughput(b, machine); })),
      out_(start_summary(cfg, layout.params)), recorder_(cfg, out_.run.run_dir, n_, per_epoch, total_),
      now_(static_cast<size_t>(n_)) {
  recorder_.set_simulated();
  out_.ideal_samples_per_s = compute_.ideal_samples_per_s(n_, cfg.global_batch);
}

SimSummary Simulator::run() {
  int64_t t = 0;
  while (t < total_) {
    adopt_pending_plan();
    if (plan_.sync.mode != SyncMode::bsp && n_ > 1) {
      t = run_segment(t);
      if (epochs_drawn()) break;
      continue;
    }
    const PolicyReport decision = decide_on_last(t);
    step(t);
    drew(1);
    record(t, decision);
    last_ = now_;
    last_cluster_ = now_cluster_;
    out_.run.iterations = ++t;
    if (epochs_drawn()) break;
    if (cfg_.stop.max_seconds && clock_ms_ / 1000.0 >= *cfg_.stop.max_seconds) {
      out_.run.stop_reason = "max_seconds";
      break;
    }
  }
  finish();
  return out_;
}

void Simulator::adopt_pending_plan() {
  if (!pending_) return;
  plan_ = std::move(*pending_);
  pending_.reset();
  ++out_.plans_applied;
}

// During t the policy decides on t-1's stats. Its real cost counts only in
// policy_ms: the simulated step hides it, as the real trainer's does.
PolicyReport Simulator::decide_on_last(int64_t t) {
  PolicyReport decision;
  if (!policy_ || last_.empty()) return decision;
  const double start = now_ms();
  policy_->submit(t - 1, last_, last_cluster_);
  pending_ = policy_->collect(decision);
  decision.applies_from = t + 1;
  out_.policy_ms += now_ms() - start;
  return decision;
}

// A bsp step: every worker computes its slice, then the all-reduce once the
// slowest is done. The gradients' norms come from the gradient model.
void Simulator::step(int64_t t) {
  double slowest = 0.0, host = 0.0;
  for (int r = 0; r < n_; ++r) {
    WorkerStats& w = now_[static_cast<size_t>(r)];
    w = WorkerStats{};
    w.rank = r;
    w.valid = 1;
    w.iteration = t;
    w.local_batch = plan_.local_batch[static_cast<size_t>(r)];
    w.start_ms = clock_ms_;
    compute_.step(r, t, w.local_batch, w, plan_.micro(r, cfg_.accumulate));
    w.samples_per_s = w.compute_ms > 0 ? static_cast<double>(w.local_batch) / (w.compute_ms / 1000.0) : 0.0;
    slowest = std::max(slowest, w.compute_ms);
    host = std::max(host, w.data_ms);
  }
  // The all-reduce after the slowest compute, or its buckets from the backward pass
  // on, of which the part past the slowest compute is exposed (comm_ms).
  double comm_ms = network_.allreduce_ms();
  NetworkModel::Sums sums;
  if (network_.bucketed()) {
    std::vector<double> compute(now_.size());
    std::vector<int64_t> passes(now_.size());
    for (size_t r = 0; r < now_.size(); ++r) {
      compute[r] = now_[r].compute_ms;
      passes[r] = now_[r].micro_batches;  // the passes its local batch takes (ComputeModel)
    }
    sums = network_.bucket_sums(compute, passes);
    comm_ms = std::max(sums.end_ms - slowest, 0.0);
  }
  const double step_ms = host + slowest + comm_ms;
  for (WorkerStats& w : now_) {
    w.idle_ms = slowest - w.compute_ms;
    w.comm_ms = comm_ms;
    w.step_ms = step_ms;
    if (network_.bucketed()) {
      w.buckets = static_cast<int64_t>(network_.buckets());
      w.allreduce_ms = sums.end_ms - sums.first_start_ms;
      w.buckets_start_ms = clock_ms_ + host + sums.first_start_ms;
    }
  }
  now_cluster_ = ClusterStats{};
  now_cluster_.global_grad_sq = gradients_.fill(t, tally_.samples, now_);
  clock_ms_ += step_ms;
}

void Simulator::drew(int64_t count) {
  const int64_t b = plan_.global_batch();
  if (b != ideal_batch_) {
    ideal_ = compute_.ideal_samples_per_s(n_, b);
    ideal_batch_ = b;
  }
  // Every iteration of a segment draws at the same noise scale: a segment's plan keeps
  // B0 (the relaxed modes refuse another B), where the efficiency is 1 whatever it is.
  tally_.add(count, b, cfg_.global_batch, gradients_.efficiency(b, tally_.samples), ideal_);
  // Epochs count samples (RunRecorder::set_samples_drawn): the same as iterations
  // while B stays B0.
  recorder_.set_samples_drawn(tally_.samples, cfg_.global_batch);
}

// A thinned trace (sim.trace_every) still has every plan change (the report marks
// them) and the summary counts every decision.
void Simulator::record(int64_t t, const PolicyReport& decision) {
  const bool decided = policy_ && decision.event != "keep" && decision.event != "idle";
  if (t % cfg_.sim.trace_every == 0 || t + 1 == total_ || epochs_drawn() || decided)
    recorder_.iteration(t, 0.0, now_, clock_ms_ / 1000.0, clock_ms_ / 1000.0, policy_ ? &decision : nullptr);
  else if (policy_)
    recorder_.untraced_decision(t, decision);
}

// A relaxed segment as the engine runs it (engine/train/sync/relaxed_segment.hpp):
// the policy decides at its end and its plan applies to the next. Returns the
// iteration after it.
int64_t Simulator::run_segment(int64_t t) {
  SyncRecord rec;
  const int64_t done = segments_.run(plan_, t, total_ - t, clock_ms_, now_, rec);
  drew(done - t);
  PolicyReport decision;
  if (policy_) {
    const double start = now_ms();
    ClusterStats cs;
    cs.sync_mode = static_cast<int32_t>(plan_.sync.mode);
    cs.iterations = static_cast<double>(rec.iterations);
    cs.updates = rec.updates;
    cs.dropped = rec.dropped;
    policy_->submit(done - 1, now_, cs);
    pending_ = policy_->collect(decision);
    decision.applies_from = done;
    out_.policy_ms += now_ms() - start;
  }
  // The segment's line carries the decision taken at its meeting, as a real run's does.
  recorder_.iteration(done - 1, 0.0, now_, clock_ms_ / 1000.0, clock_ms_ / 1000.0, policy_ ? &decision : nullptr,
                      &rec);
  out_.run.iterations = done;
  return done;
}

void Simulator::finish() {
  RunSummary& run = out_.run;
  if (run.stop_reason.empty())
    run.stop_reason =
        cfg_.stop.max_iterations && run.iterations == *cfg_.stop.max_iterations ? "max_iterations" : "epochs";
  run.epochs = static_cast<double>(tally_.samples) / static_cast<double>(per_epoch_ * cfg_.global_batch);
  run.train_s = clock_ms_ / 1000.0;
  run.samples_per_s = clock_ms_ > 0 ? static_cast<double>(tally_.samples) / run.train_s : 0.0;
  // The ideal at the batches the run drew: B0's alone while B stays B0.
  if (tally_.samples > 0) out_.ideal_samples_per_s = tally_.ideal_samples_per_s();
  run.wall_s = wall_.elapsed_ms() / 1000.0;
  recorder_.finish(run, cfg_);
  log::end_progress();
  out_.plan_changes = recorder_.plans_decided();
  if (tally_.changed || gradients_.modelled()) out_.mean_global_batch = tally_.mean_batch();
  if (gradients_.modelled()) {
    out_.goodput = tally_.goodput(run.train_s);
    out_.statistical_efficiency = tally_.efficiency();
    out_.noise_scale_end = gradients_.noise_scale(tally_.samples);
  }
  write_sim_summary();
  const double efficiency = out_.ideal_samples_per_s > 0 ? run.samples_per_s / out_.ideal_samples_per_s : 0.0;
  log::info("simulated {} iterations of {} workers in {:.2f} s: {:.0f} samples/s ({:.2f} of the ideal {:.0f}), "
               "{} plan change(s) ({} applied before the end), policy {:.1f} ms in all{}; nothing was trained "
               "(no loss or accuracy)",
               run.iterations, n_, run.wall_s, run.samples_per_s, efficiency, out_.ideal_samples_per_s,
               out_.plan_changes, out_.plans_applied, out_.policy_ms, batch_text());
}

// The global batches and goodput, for the summary line ("" while neither a plan
// changed B nor the noise is modelled).
std::string Simulator::batch_text() const {
  std::string text;
  if (out_.mean_global_batch)
    text += fmt::format("; mean global batch {:.1f} (B0 {})", *out_.mean_global_batch, cfg_.global_batch);
  if (out_.goodput)
    text += fmt::format(", goodput {:.0f} samples/s at B0's worth (statistical efficiency {:.3f}, noise scale {:.0f} "
                        "at the end)",
                        *out_.goodput, *out_.statistical_efficiency, *out_.noise_scale_end);
  return text;
}

// The simulation's own facts, next to what every run's summary holds.
void Simulator::write_sim_summary() const {
  const std::string path = out_.run.run_dir + "/summary.json";
  nlohmann::json j = nlohmann::json::parse(read_text_file(path));
  j["simulated"] = true;
  j["ideal_samples_per_s"] = out_.ideal_samples_per_s;
  j["efficiency"] = out_.ideal_samples_per_s > 0 ? out_.run.samples_per_s / out_.ideal_samples_per_s : 0.0;
  j["policy_ms_total"] = out_.policy_ms;
  // plan_changes: plans the policy decided, the count of policy.plan_changes;
  // plans_applied: those in force before the run ended (one decided in the last
  // iterations never applies).
  j["plan_changes"] = out_.plan_changes;
  j["plans_applied"] = out_.plans_applied;
  // The global batches (policy.global_batch) and the goodput they give
  // (sim.noise_scale): null where not known.
  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  if (out_.mean_global_batch) {
    j["mean_global_batch"] = *out_.mean_global_batch;
    j["goodput"] = optional(out_.goodput);
    j["statistical_efficiency"] = optional(out_.statistical_efficiency);
  }
  j["sim"] = {{"noise", cfg_.sim.noise},
              {"noise_distribution", cfg_.sim.noise_distribution},
              {"latency_us", cfg_.sim.latency_us},
              {"bandwidth_gb_s", cfg_.sim.bandwidth_gb_s},
              {"comm_ms", network_.allreduce_ms()},
              {"noise_scale", cfg_.sim.noise_scale},
              {"noise_growth", cfg_.sim.noise_growth},
              {"noise_scale_end", optional(out_.noise_scale_end)}};
  write_text_file(path, j.dump(2) + "\n");
}

}  // namespace

SimSummary simulate(const ExperimentConfig& cfg, const DeviceProfile& machine, const GradientLayout& layout,
                    int64_t per_epoch, PlanPolicy* policy) {
  return Simulator(cfg, machine, layout, per_epoch, policy).run();
}

}  // namespace tandem
