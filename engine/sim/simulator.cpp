#include "engine/sim/simulator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/record/run_dir.hpp"
#include "engine/train/trainer.hpp"

namespace tandem {

namespace {

// A factor with mean 1 for (seed, worker, iteration): counter-based, so any run of
// the same experiment sees the same noise. sim.noise sets the spread:
//   lognormal  exp(s z - s^2/2): multiplicative jitter, right-skewed (the default:
//              measured step times of a busy host look like this);
//   normal     1 + s z, symmetric;
//   uniform    1 + s sqrt(3) (2u - 1): standard deviation s, bounded;
//   spikes     (1 - s) + Exp(s): mostly just under the mean, an exponential tail
//              of occasional long steps (a time slice lost to another process).
// The symmetric ones are floored at 0.05 (a time is never negative); keep s below
// ~0.3 for them, or the floor lifts the mean.
double noise_factor(const SimConfig& c, int worker, int64_t iteration) {
  if (c.noise <= 0.0) return 1.0;
  Rng rng(mix_seed(mix_seed(c.seed, static_cast<uint64_t>(worker)), static_cast<uint64_t>(iteration)));
  const double s = c.noise;
  const std::string& d = c.noise_distribution;
  if (d == "normal") return std::max(0.05, 1.0 + s * rng.normal());
  if (d == "uniform") return std::max(0.05, 1.0 + s * std::sqrt(3.0) * (2.0 * rng.uniform() - 1.0));
  if (d == "spikes") {
    // 1 - u in (0, 1]: the log is finite.
    const double excess = -s * std::log(1.0 - static_cast<double>(rng.uniform()));
    return std::max(0.05, 1.0 - s) + excess;
  }
  return std::exp(s * rng.normal() - 0.5 * s * s);
}

// One relaxed-sync segment (plan.hpp SyncMode), from iteration t, at most
// max_iterations global batches long; advances the clock, leaves each worker's
// stats (means per step) in `stats` and the segment's record in `rec`, and
// returns the iteration it ends at.
//   local:   H steps each, then the model average (a ring of parameters and momenta).
//   ksync:   every round, each worker computes from the same weights; the update
//            lands with the k-th arrival plus the server's round trip, and the later
//            workers' gradients are dropped (here they restart with the new
//            weights at once, a slight favour to ksync: the engine's finish their
//            stale step first).
//   grouped: each group computes, all-reduces inside and pushes; an event loop over
//            the groups' completion times, the staleness bound holding replies as
//            the server does; updates in flight when the segment's samples are in
//            still land.
template <typename StepOf, typename Ring>
int64_t simulate_segment(const Plan& plan, int64_t t, int64_t max_iterations, const StepOf& step_of,
                         const Ring& ring_ms, double bytes, double server_ms, double& clock_ms,
                         std::vector<WorkerStats>& stats, SyncRecord& rec) {
  const int n = static_cast<int>(plan.local_batch.size());
  const int64_t B = plan.global_batch();
  const double start = clock_ms;
  std::vector<int64_t> steps(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    WorkerStats& w = stats[static_cast<size_t>(r)];
    w = WorkerStats{};
    w.rank = r;
    w.valid = 1;
    w.local_batch = plan.local_batch[static_cast<size_t>(r)];
    w.sync_mode = static_cast<int32_t>(plan.sync.mode);
    w.group = plan.sync.mode == SyncMode::grouped ? plan.sync.group[static_cast<size_t>(r)] : 0;
    w.start_ms = start;
  }
  // One step of worker r at iteration it into the sums; returns its time.
  auto step = [&](int r, int64_t it) {
    WorkerStats one;
    step_of(r, it, plan.local_batch[static_cast<size_t>(r)], one);
    WorkerStats& w = stats[static_cast<size_t>(r)];
    w.compute_ms += one.compute_ms;
    w.real_compute_ms += one.real_compute_ms;
    w.data_ms += one.data_ms;
    w.speed += one.speed;
    ++steps[static_cast<size_t>(r)];
    return one.data_ms + one.compute_ms;
  };
  rec.mode = plan.sync.str();
  rec.groups = plan.sync.group;
  int64_t samples = 0, iterations = 0;
  double staleness_sum = 0.0;
  if (plan.sync.mode == SyncMode::local) {
    iterations = std::min<int64_t>(plan.sync.local_steps, max_iterations);
    std::vector<double> busy(static_cast<size_t>(n), 0.0);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < iterations; ++i) busy[static_cast<size_t>(r)] += step(r, t + i);
    const double slowest = *std::max_element(busy.begin(), busy.end());
    const double average = ring_ms(n, 2.0 * bytes);
    for (int r = 0; r < n; ++r) {
      stats[static_cast<size_t>(r)].idle_ms = slowest - busy[static_cast<size_t>(r)];
      stats[static_cast<size_t>(r)].comm_ms = average;
    }
    clock_ms += slowest + average;
    rec.updates = 1;
  } else if (plan.sync.mode == SyncMode::ksync) {
    const int64_t target = std::min<int64_t>(plan.sync.sync_every, max_iterations) * B;
    std::vector<std::pair<double, int>> arrival(static_cast<size_t>(n));
    while (samples < target) {
      const int64_t it = t + rec.updates;
      for (int r = 0; r < n; ++r) arrival[static_cast<size_t>(r)] = {step(r, it), r};
      std::sort(arrival.begin(), arrival.end());
      const double kth = arrival[static_cast<size_t>(plan.sync.k - 1)].first;
      for (int i = 0; i < n; ++i) {
        WorkerStats& w = stats[static_cast<size_t>(arrival[static_cast<size_t>(i)].second)];
        ++w.pushes;
        if (i < plan.sync.k) {
          w.idle_ms += kth - arrival[static_cast<size_t>(i)].first;
          samples += w.local_batch;
          ++rec.applied;
        } else {
          ++rec.dropped;
        }
        w.comm_ms += server_ms;
      }
      ++rec.updates;
      clock_ms += kth + server_ms;
    }
  } else {  // grouped
    const int G = plan.sync.groups();
    std::vector<std::vector<int>> members(static_cast<size_t>(G));
    std::vector<int64_t> group_batch(static_cast<size_t>(G), 0);
    for (int r = 0; r < n; ++r) {
      members[static_cast<size_t>(plan.sync.group[static_cast<size_t>(r)])].push_back(r);
      group_batch[static_cast<size_t>(plan.sync.group[static_cast<size_t>(r)])] += plan.local_batch[static_cast<size_t>(r)];
    }
    std::vector<int64_t> base(static_cast<size_t>(G), 0), updates_of(static_cast<size_t>(G), 0);
    std::vector<double> done_at(static_cast<size_t>(G)), held_since(static_cast<size_t>(G), -1.0);
    int64_t version = 0;
    // A group's next update: its slowest member's step, the all-reduce inside, the push.
    auto launch = [&](int g, double from) {
      double slowest = 0.0;
      std::vector<double> times;
      for (int r : members[static_cast<size_t>(g)]) times.push_back(step(r, t + updates_of[static_cast<size_t>(g)]));
      for (double x : times) slowest = std::max(slowest, x);
      size_t i = 0;
      const double comm = ring_ms(static_cast<int>(members[static_cast<size_t>(g)].size()), bytes) + server_ms;
      for (int r : members[static_cast<size_t>(g)]) {
        stats[static_cast<size_t>(r)].idle_ms += slowest - times[i++];
        stats[static_cast<size_t>(r)].comm_ms += comm;
      }
      done_at[static_cast<size_t>(g)] = from + slowest + comm;
    };
    for (int g = 0; g < G; ++g) launch(g, clock_ms);
    const int64_t target = std::min<int64_t>(plan.sync.sync_every, max_iterations) * B;
    double now = clock_ms;
    auto computing = [&](int h) { return held_since[static_cast<size_t>(h)] < 0.0; };
    auto may_go = [&](int g) {
      for (int h = 0; h < G; ++h)
        if (h != g && computing(h) && version - base[static_cast<size_t>(h)] > plan.sync.staleness) return false;
      return true;
    };
    bool meet = false;
    for (int in_flight = G; in_flight > 0;) {
      int g = -1;
      for (int h = 0; h < G; ++h)
        if (computing(h) && done_at[static_cast<size_t>(h)] >= 0.0 &&
            (g < 0 || done_at[static_cast<size_t>(h)] < done_at[static_cast<size_t>(g)]))
          g = h;
      if (g < 0) break;  // nothing in flight
      now = done_at[static_cast<size_t>(g)];
      const double stale = static_cast<double>(version - base[static_cast<size_t>(g)]);
      ++version;
      ++rec.updates;
      ++rec.applied;
      staleness_sum += stale;
      rec.staleness_max = std::max(rec.staleness_max, stale);
      samples += group_batch[static_cast<size_t>(g)];
      ++updates_of[static_cast<size_t>(g)];
      stats[static_cast<size_t>(members[static_cast<size_t>(g)].front())].pushes += 1;
      if (samples >= target) meet = true;
      if (meet) {  // this group is told to meet; the others land their updates in flight
        done_at[static_cast<size_t>(g)] = -1.0;
        --in_flight;
        continue;
      }
      held_since[static_cast<size_t>(g)] = now;
      // Release every held group that may go (the slowest never waits).
      for (bool again = true; again;) {
        again = false;
        for (int h = 0; h < G; ++h)
          if (!computing(h) && done_at[static_cast<size_t>(h)] >= 0.0 && may_go(h)) {
            for (int r : members[static_cast<size_t>(h)])
              stats[static_cast<size_t>(r)].idle_ms += now - held_since[static_cast<size_t>(h)];
            held_since[static_cast<size_t>(h)] = -1.0;
            base[static_cast<size_t>(h)] = version;
            launch(h, now);
            again = true;
          }
      }
    }
    clock_ms = now;
  }
  iterations = plan.sync.mode == SyncMode::local ? iterations : std::max<int64_t>(1, samples / B);
  rec.iterations = iterations;
  rec.staleness_mean = rec.applied ? staleness_sum / static_cast<double>(rec.applied) : 0.0;
  rec.segment_ms = clock_ms - start;
  for (int r = 0; r < n; ++r) {
    WorkerStats& w = stats[static_cast<size_t>(r)];
    const double k = static_cast<double>(std::max<int64_t>(steps[static_cast<size_t>(r)], 1));
    w.steps = steps[static_cast<size_t>(r)];
    for (double* v : {&w.compute_ms, &w.real_compute_ms, &w.data_ms, &w.speed, &w.idle_ms, &w.comm_ms}) *v /= k;
    w.step_ms = (clock_ms - start) / k;
    w.iteration = t + iterations - 1;
    w.samples_per_s = w.compute_ms > 0 ? static_cast<double>(w.local_batch) / (w.compute_ms / 1000.0) : 0.0;
  }
  return t + iterations;
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
  plan.sync = initial_sync(cfg, n);
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

  // A ring all-reduce among `members` ranks of `count_bytes`; a server round trip.
  auto ring_ms = [&](int members, double count_bytes) {
    return members <= 1 ? 0.0
                        : 2.0 * (members - 1) * cfg.sim.latency_us / 1000.0 +
                              2.0 * (members - 1) / members * count_bytes / (cfg.sim.bandwidth_gb_s * 1e9) * 1000.0 +
                              link_delay;
  };
  const double server_ms = 2.0 * (cfg.sim.latency_us / 1000.0 + bytes / (cfg.sim.bandwidth_gb_s * 1e9) * 1000.0);
  // One step of worker r at iteration t: host part and device compute.
  auto step_of = [&](int r, int64_t t, int64_t b, WorkerStats& w) {
    const double real = profile_ms(machine, static_cast<double>(b));
    w.real_compute_ms = real;
    w.compute_ms = b > 0 ? emulator.stretch(r, t, b, real).target_ms * noise_factor(cfg.sim, r, t) : 0.0;
    w.data_ms = host_profile_ms(machine, static_cast<double>(b));
    w.speed = emulator.speed(r, t);
  };

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
    if (plan.sync.mode != SyncMode::bsp && n > 1) {
      // A relaxed segment (engine/train/sync/relaxed_segment.hpp), as the engine runs it; the
      // policy decides at its end and the plan applies to the next.
      SyncRecord rec;
      const int64_t done = simulate_segment(plan, t, total - t, step_of, ring_ms, bytes, server_ms, clock_ms, now, rec);
      recorder.iteration(done - 1, 0.0, now, clock_ms / 1000.0, nullptr, &rec);
      if (policy) {
        const double start = now_ms();
        ClusterStats cs;
        cs.sync_mode = static_cast<int32_t>(plan.sync.mode);
        cs.iterations = static_cast<double>(rec.iterations);
        cs.updates = rec.updates;
        cs.dropped = rec.dropped;
        policy->submit(done - 1, now, cs);
        decision = PolicyReport{};
        pending = policy->collect(decision);
        out.policy_ms += now_ms() - start;
      }
      out.run.iterations = done;
      t = done - 1;
      continue;
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
    // A thinned trace still has every plan change (the report marks them) and the
    // summary counts every decision.
    const bool decided = policy && decision.event != "keep" && decision.event != "idle";
    if (t % cfg.sim.trace_every == 0 || t + 1 == total || decided)
      recorder.iteration(t, 0.0, now, clock_ms / 1000.0, policy ? &decision : nullptr);
    else if (policy)
      recorder.untraced_decision(t, decision);
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
  j["sim"] = {{"noise", cfg.sim.noise}, {"noise_distribution", cfg.sim.noise_distribution}, {"latency_us", cfg.sim.latency_us}, {"bandwidth_gb_s", cfg.sim.bandwidth_gb_s},
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
