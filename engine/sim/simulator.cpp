#include "engine/sim/simulator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"
#include "engine/train/emulator.hpp"
#include "engine/train/run_dir.hpp"

namespace tandem {

namespace {

// A log-normal factor with mean 1 for (seed, worker, iteration): counter-based, so
// any run of the same experiment sees the same noise.
double noise_factor(const SimConfig& c, int worker, int64_t iteration) {
  if (c.noise <= 0.0) return 1.0;
  Rng rng(mix_seed(mix_seed(c.seed, static_cast<uint64_t>(worker)), static_cast<uint64_t>(iteration)));
  const double z = rng.normal();
  return std::exp(c.noise * z - 0.5 * c.noise * c.noise);
}

}  // namespace

SimSummary simulate(const ExperimentConfig& cfg, const DeviceProfile& machine, size_t param_count,
                    int64_t per_epoch, PlanPolicy* policy) {
  const Stopwatch wall;
  const int n = cfg.workers;
  TANDEM_CHECK_HINT(n >= 1, "set workers >= 1", "a simulated cluster of ", n, " workers");
  Emulator emulator(cfg.emulation, n);
  int64_t total = static_cast<int64_t>(std::ceil(cfg.stop.epochs * static_cast<double>(per_epoch)));
  if (cfg.stop.max_iterations) total = std::min(total, *cfg.stop.max_iterations);

  Plan plan;
  if (cfg.plan.kind == "fixed")
    plan.local_batch = cfg.plan.batches;
  else if (cfg.plan.kind == "proportional")
    plan = Plan::proportional(emulator.throughput(Plan::equal(n, cfg.global_batch).local_batch, machine),
                              cfg.global_batch);
  else
    plan = Plan::equal(n, cfg.global_batch);
  plan.validate(n, cfg.global_batch);

  SimSummary out;
  out.run.workers = n;
  out.run.parameters = static_cast<int64_t>(param_count);
  out.run.run_dir = make_run_dir(cfg.out_dir, cfg.name);
  write_text_file(out.run.run_dir + "/config.json", cfg.resolved_json.empty() ? "{}\n" : cfg.resolved_json + "\n");
  RunRecorder recorder(cfg, out.run.run_dir, n, per_epoch, total);

  // The ring all-reduce of the gradients (and the control tail: a few floats).
  const double bytes = static_cast<double>(param_count) * sizeof(float);
  double link_delay = 0.0;
  for (int r = 0; r < n; ++r) link_delay = std::max(link_delay, emulator.comm_delay_ms(r));
  const double comm_ms = n == 1 ? 0.0
                                : 2.0 * (n - 1) * cfg.sim.latency_us / 1000.0 +
                                      2.0 * (n - 1) / n * bytes / (cfg.sim.bandwidth_gb_s * 1e9) * 1000.0 + link_delay;

  // The ideal: every worker alone at an equal share of the batch.
  {
    const int64_t share = std::max<int64_t>(1, cfg.global_batch / n);
    for (int r = 0; r < n; ++r) {
      const double ms = host_profile_ms(machine, static_cast<double>(share)) +
                        emulator.stretch(r, 0, share, profile_ms(machine, static_cast<double>(share))).target_ms;
      out.ideal_samples_per_s += static_cast<double>(share) / (ms / 1000.0);
    }
  }

  std::vector<WorkerStats> now(static_cast<size_t>(n)), last;
  std::optional<Plan> pending;  // decided during t, in force from t+1
  double clock_ms = 0.0;
  PolicyReport decision;
  for (int64_t t = 0; t < total; ++t) {
    if (pending) {
      plan = std::move(*pending);
      pending.reset();
      ++out.plan_changes;
    }
    // During t: the policy decides on t-1's stats (its real cost counts as real time
    // only in policy_ms; the simulated step hides it, as the real trainer does).
    decision = PolicyReport{};
    if (policy && !last.empty()) {
      const double start = now_ms();
      policy->submit(t - 1, last);
      pending = policy->collect(decision);
      decision.applies_from = t + 1;
      out.policy_ms += now_ms() - start;
    }
    double slowest = 0.0, host = 0.0;
    for (int r = 0; r < n; ++r) {
      const int64_t b = plan.local_batch[static_cast<size_t>(r)];
      WorkerStats& w = now[static_cast<size_t>(r)];
      w = WorkerStats{};
      w.rank = r;
      w.valid = 1;
      w.iteration = t;
      w.local_batch = b;
      w.start_ms = clock_ms;
      const double real = profile_ms(machine, static_cast<double>(b));
      w.real_compute_ms = real;
      w.compute_ms = b > 0 ? emulator.stretch(r, t, b, real).target_ms * noise_factor(cfg.sim, r, t) : 0.0;
      w.speed = emulator.speed(r, t);
      w.data_ms = host_profile_ms(machine, static_cast<double>(b));
      w.samples_per_s = w.compute_ms > 0 ? static_cast<double>(b) / (w.compute_ms / 1000.0) : 0.0;
      slowest = std::max(slowest, w.compute_ms);
      host = std::max(host, w.data_ms);
    }
    const double step = host + slowest + comm_ms;
    for (WorkerStats& w : now) {
      w.idle_ms = slowest - w.compute_ms;
      w.comm_ms = comm_ms;
      w.step_ms = step;
    }
    clock_ms += step;
    if (t % cfg.sim.trace_every == 0 || t + 1 == total)
      recorder.iteration(t, 0.0, now, clock_ms / 1000.0, policy ? &decision : nullptr);
    last = now;
    if (cfg.stop.max_seconds && clock_ms / 1000.0 >= *cfg.stop.max_seconds) {
      out.run.iterations = t + 1;
      out.run.stop_reason = "max_seconds";
      break;
    }
    out.run.iterations = t + 1;
  }
  if (out.run.stop_reason.empty()) out.run.stop_reason = cfg.stop.max_iterations && out.run.iterations == *cfg.stop.max_iterations ? "max_iterations" : "epochs";
  out.run.epochs = static_cast<double>(out.run.iterations) / static_cast<double>(per_epoch);
  out.run.train_s = clock_ms / 1000.0;
  out.run.samples_per_s =
      clock_ms > 0 ? static_cast<double>(out.run.iterations * cfg.global_batch) / out.run.train_s : 0.0;
  out.run.wall_s = wall.elapsed_ms() / 1000.0;
  recorder.finish(out.run, cfg);
  // The simulation's own facts, next to what every run's summary holds.
  const std::string path = out.run.run_dir + "/summary.json";
  nlohmann::json j = nlohmann::json::parse(read_text_file(path));
  j["simulated"] = true;
  j["ideal_samples_per_s"] = out.ideal_samples_per_s;
  j["efficiency"] = out.ideal_samples_per_s > 0 ? out.run.samples_per_s / out.ideal_samples_per_s : 0.0;
  j["policy_ms_total"] = out.policy_ms;
  j["plan_changes"] = out.plan_changes;
  j["sim"] = {{"noise", cfg.sim.noise}, {"latency_us", cfg.sim.latency_us}, {"bandwidth_gb_s", cfg.sim.bandwidth_gb_s},
              {"comm_ms", comm_ms}};
  write_text_file(path, j.dump(2) + "\n");
  spdlog::info("simulated {} iterations of {} workers in {:.2f} s: {:.0f} samples/s ({:.2f} of the ideal {:.0f}), "
               "{} plan change(s), policy {:.1f} ms in all",
               out.run.iterations, n, out.run.wall_s, out.run.samples_per_s,
               out.ideal_samples_per_s > 0 ? out.run.samples_per_s / out.ideal_samples_per_s : 0.0,
               out.ideal_samples_per_s, out.plan_changes, out.policy_ms);
  return out;
}

}  // namespace tandem
