// Cost of a policy decision, as the engine pays it and as its budget counts it: the
// policy runs in its sandbox (interpreted, under the budget hook), one decision is
// building the stats table plus step(), and its cost is the CPU time of the thread
// that ran it (policy.budget_ms counts CPU time: engine/script/budget.hpp), with the
// wall time beside it. Every shipped policy (the batch policies equal, proportional,
// boa, lbb; goodput with the global batch free over 4x; the sync-mode policies asgd,
// local_sgd, grouped, star) at 4, 64, 256 and 1024 workers, plus the CPU time of
// loading the file and of init(cluster) (their budget is policy.budget_ms + 2 s). Synthetic stats: speeds repeat 1, 1,
// 0.5, 0.25 (compute_ms = local_batch / speed * 0.07 + 0.5, with noise), worker 5
// slows down 4x half way, gradient norms follow a noise scale of 64 samples a
// worker; each plan (batches and sync mode) is fed back with the engine's lag of 3
// iterations. Also the min-max solve alone (tools/bench/minmax_probe.lua).
//
// This is where a policy's cost at large worker counts is measured (DESIGN.md habit
// 10); the Lua tests run the same sizes for correctness only. Compare a decision's
// CPU time with the default budget of 50 ms ("max/50": the costliest decision's
// share of it, on this machine).
//
// usage: tandem_policy_bench [--iterations 200] [--workers 4,64,256,1024]
//                            [--policies equal,lbb,...] [--out FILE]
#include <lua.hpp>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/script/lua_state.hpp"
#include "engine/script/policy_sandbox.hpp"

using namespace tandem;

namespace {

constexpr double kDefaultBudgetMs = 50.0;

struct Cost {
  double load_cpu_ms = 0.0, init_cpu_ms = 0.0;  // the setup's calls (their budget: policy.budget_ms + 2 s)
  double cpu_mean_ms = 0.0, cpu_p50_ms = 0.0, cpu_max_ms = 0.0;
  double wall_mean_ms = 0.0, wall_max_ms = 0.0;
  double solve_mean_ms = -1.0;
  int plans = 0, failures = 0;
};

double mean(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x / static_cast<double>(v.size());
  return v.empty() ? 0.0 : s;
}

// Policies that choose the global batch get a range of 4x around B0.
bool free_batch(const std::string& policy) { return policy == "goodput"; }

Cost measure(const std::string& file, const std::string& policy, int workers, int iterations) {
  const int64_t batch = 128LL * workers;
  PolicyCluster c;
  c.workers = workers;
  c.global_batch = batch;
  if (free_batch(policy)) {
    c.global_batch_min = batch / 2;
    c.global_batch_max = batch * 2;
  }
  c.min_batch.assign(static_cast<size_t>(workers), 0);
  c.max_batch.assign(static_cast<size_t>(workers), c.batch_max());
  c.devices.assign(static_cast<size_t>(workers), "synthetic");
  // A budget no decision reaches: this measures what a decision costs, it judges nothing.
  Cost cost;
  const double load_start = thread_cpu_ms();
  PolicySandbox box(file, {60000.0, 1024.0});
  cost.load_cpu_ms = thread_cpu_ms() - load_start;
  const double init_start = thread_cpu_ms();
  box.init(c);
  cost.init_cpu_ms = thread_cpu_ms() - init_start;
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(1.0, 0.02);
  const double speeds[] = {1.0, 1.0, 0.5, 0.25};
  const double b_noise = 64.0 * workers;
  std::vector<int64_t> plan(static_cast<size_t>(workers), 128);
  SyncPlan sync;
  std::deque<std::pair<std::vector<int64_t>, SyncPlan>> pending;  // plans on their way (3 iterations of lag)
  std::vector<double> cpu, wall, solve;
  for (int t = 0; t < iterations; ++t) {
    std::vector<WorkerStats> s(static_cast<size_t>(workers));
    int64_t sum = 0;
    for (int r = 0; r < workers; ++r) {
      WorkerStats& w = s[static_cast<size_t>(r)];
      const double speed = speeds[r % 4] * (r == 5 && t >= iterations / 2 ? 0.25 : 1.0);
      w.rank = r;
      w.valid = 1;
      w.iteration = t;
      w.local_batch = plan[static_cast<size_t>(r)];
      w.compute_ms = (static_cast<double>(w.local_batch) / speed * 0.07 + 0.5) * noise(rng);
      w.data_ms = 0.1;
      w.comm_ms = 2.0 * noise(rng);
      w.optimizer_ms = 0.3;
      w.step_ms = 40.0;
      w.samples_per_s = static_cast<double>(w.local_batch) / w.compute_ms * 1000.0;
      w.memory_mb = 100.0 + 0.01 * static_cast<double>(w.local_batch);
      w.grad_sq = w.local_batch > 0 ? (1.0 + b_noise / static_cast<double>(w.local_batch)) * noise(rng) : 0.0;
      w.sync_mode = static_cast<int32_t>(sync.mode);
      w.group = sync.group.empty() ? 0 : sync.group[static_cast<size_t>(r)];
      sum += w.local_batch;
    }
    ClusterStats cluster;
    cluster.sync_mode = static_cast<int32_t>(sync.mode);
    cluster.global_grad_sq = (1.0 + b_noise / static_cast<double>(std::max<int64_t>(sum, 1))) * noise(rng);
    try {
      const PolicyAnswer a = box.step(t, sum, s, cluster);
      if (!a.keep) ++cost.plans;
      pending.emplace_back(a.keep ? plan : a.local_batch, a.keep ? sync : a.sync);
    } catch (const PolicyFailure& f) {
      ++cost.failures;
      if (cost.failures == 1) std::fprintf(stderr, "%s at %d workers, iteration %d: %s\n", policy.c_str(), workers, t, f.what());
      pending.emplace_back(plan, sync);
    }
    cpu.push_back(box.last_call_cpu_ms());
    wall.push_back(box.last_call_ms());
    lua_getglobal(box.lua(), "solve_ms");
    if (lua_isnumber(box.lua(), -1)) solve.push_back(lua_tonumber(box.lua(), -1));
    lua_pop(box.lua(), 1);
    if (pending.size() >= 3) {
      plan = pending.front().first;
      sync = pending.front().second;
      pending.pop_front();
    }
  }
  cost.cpu_mean_ms = mean(cpu);
  cost.wall_mean_ms = mean(wall);
  cost.wall_max_ms = *std::max_element(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  cost.cpu_p50_ms = cpu[cpu.size() / 2];
  cost.cpu_max_ms = cpu.back();
  if (!solve.empty()) cost.solve_mean_ms = mean(solve);
  return cost;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 200;
  std::string out;
  std::vector<std::string> policies = {"equal", "proportional", "boa", "lbb", "goodput",
                                       "asgd", "local_sgd", "grouped", "star"};
  std::vector<int> sizes = {4, 64, 256, 1024};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--iterations") iterations = std::stoi(argv[i + 1]);
    else if (a == "--out") out = argv[i + 1];
    else if (a == "--policies") policies = split(argv[i + 1]);
    else if (a == "--workers") {
      sizes.clear();
      for (const std::string& n : split(argv[i + 1])) sizes.push_back(std::stoi(n));
    } else {
      std::fprintf(stderr, "usage: tandem_policy_bench [--iterations N] [--workers 4,64,...] [--policies a,b,...] "
                           "[--out FILE]\n");
      return 2;
    }
  }
  try {
    const std::string root = tandem_root();
    nlohmann::json result{{"benchmark", "policy_cost"}, {"iterations", iterations},
                          {"measure", "CPU ms of the thread running a decision (stats table + step), as "
                                      "policy.budget_ms counts it; wall ms beside it"},
                          {"default_budget_ms", kDefaultBudgetMs}};
    std::printf("%-12s %7s  %10s %10s %10s %7s  %10s %10s  %15s  %s\n", "policy", "workers", "cpu mean", "cpu p50",
                "cpu max", "max/50", "wall mean", "wall max", "load+init cpu", "plans");
    for (const std::string& policy : policies) {
      for (const int workers : sizes) {
        // Fewer decisions at the sizes where each one is costly; enough for a median.
        const int n = workers >= 1024 ? std::max(20, iterations / 4) : workers >= 256 ? std::max(40, iterations / 2)
                                                                                       : iterations;
        const Cost c = measure(root + "/scripts/policies/" + policy + ".lua", policy, workers, n);
        std::printf("%-12s %7d  %7.3f ms %7.3f ms %7.3f ms %6.0f%%  %7.3f ms %7.3f ms  %5.1f + %5.1f ms  %d of %d%s\n",
                    policy.c_str(), workers, c.cpu_mean_ms, c.cpu_p50_ms, c.cpu_max_ms,
                    100.0 * c.cpu_max_ms / kDefaultBudgetMs, c.wall_mean_ms, c.wall_max_ms, c.load_cpu_ms,
                    c.init_cpu_ms, c.plans, n,
                    c.failures ? (" (" + std::to_string(c.failures) + " failed)").c_str() : "");
        std::fflush(stdout);
        result["policies"][policy][std::to_string(workers)] = {
            {"decisions", n},          {"cpu_mean_ms", c.cpu_mean_ms},   {"cpu_p50_ms", c.cpu_p50_ms},
            {"cpu_max_ms", c.cpu_max_ms}, {"wall_mean_ms", c.wall_mean_ms}, {"wall_max_ms", c.wall_max_ms},
            {"load_cpu_ms", c.load_cpu_ms}, {"init_cpu_ms", c.init_cpu_ms}, {"plans", c.plans},
            {"failures", c.failures}};
      }
    }
    for (const int workers : sizes) {
      const int n = workers >= 1024 ? std::max(20, iterations / 4) : iterations;
      const Cost c = measure(root + "/tools/bench/minmax_probe.lua", "minmax_probe", workers, n);
      std::printf("min-max solve %5d workers: %8.3f ms mean (CPU, interpreted, in the sandbox)\n", workers,
                  c.solve_mean_ms);
      result["minmax_solve_ms"][std::to_string(workers)] = c.solve_mean_ms;
    }
    if (!out.empty()) std::ofstream(out) << result.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem_policy_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
