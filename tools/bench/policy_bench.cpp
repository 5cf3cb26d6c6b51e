// Cost of a policy decision, as the engine pays it: the policy runs in its sandbox
// (interpreted, under the budget hook), and one decision is building the stats
// table plus step(). Synthetic stats for 4, 64 and 1024 workers whose speeds
// repeat 1, 1, 0.5, 0.25 (compute_ms = local_batch / speed * 0.07 + 0.5, with
// noise); each policy's plans are fed back with the engine's lag of 3 iterations.
// Also the min-max solve alone for 64 workers (tools/bench/minmax_probe.lua).
//
// usage: tandem_policy_bench [--iterations 200] [--out FILE]
#include <lua.hpp>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/script/lua_state.hpp"
#include "engine/script/policy_sandbox.hpp"

using namespace tandem;

namespace {

struct Cost {
  double mean_ms = 0.0, p50_ms = 0.0, max_ms = 0.0, solve_mean_ms = -1.0;
};

Cost measure(const std::string& file, int workers, int iterations) {
  const int64_t batch = 128LL * workers;
  PolicyCluster c;
  c.workers = workers;
  c.global_batch = batch;
  c.min_batch.assign(static_cast<size_t>(workers), 0);
  c.max_batch.assign(static_cast<size_t>(workers), batch);
  c.devices.assign(static_cast<size_t>(workers), "synthetic");
  PolicySandbox box(file, {10000.0, 1024.0});
  box.init(c);
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(1.0, 0.02);
  const double speeds[] = {1.0, 1.0, 0.5, 0.25};
  std::vector<int64_t> plan(static_cast<size_t>(workers), 128);
  std::deque<std::vector<int64_t>> pending;  // plans on their way (3 iterations of lag)
  std::vector<double> ms, solve;
  for (int t = 0; t < iterations; ++t) {
    std::vector<WorkerStats> s(static_cast<size_t>(workers));
    for (int r = 0; r < workers; ++r) {
      WorkerStats& w = s[static_cast<size_t>(r)];
      w.rank = r;
      w.valid = 1;
      w.iteration = t;
      w.local_batch = plan[static_cast<size_t>(r)];
      w.compute_ms = (static_cast<double>(w.local_batch) / speeds[r % 4] * 0.07 + 0.5) * noise(rng);
      w.samples_per_s = static_cast<double>(w.local_batch) / w.compute_ms * 1000.0;
      w.step_ms = 40.0;
    }
    const PolicyAnswer a = box.step(t, batch, s);
    ms.push_back(box.last_call_ms());
    lua_getglobal(box.lua(), "solve_ms");
    if (lua_isnumber(box.lua(), -1)) solve.push_back(lua_tonumber(box.lua(), -1));
    lua_pop(box.lua(), 1);
    pending.push_back(a.keep ? plan : a.local_batch);
    if (pending.size() >= 3) {
      plan = pending.front();
      pending.pop_front();
    }
  }
  Cost c2;
  for (double m : ms) c2.mean_ms += m / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  c2.p50_ms = ms[ms.size() / 2];
  c2.max_ms = ms.back();
  if (!solve.empty()) {
    c2.solve_mean_ms = 0.0;
    for (double m : solve) c2.solve_mean_ms += m / static_cast<double>(solve.size());
  }
  return c2;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 200;
  std::string out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--iterations") iterations = std::stoi(argv[i + 1]);
    else if (a == "--out") out = argv[i + 1];
  }
  try {
    const std::string root = tandem_root();
    nlohmann::json result{{"benchmark", "policy_cost"}, {"iterations", iterations}};
    for (const char* policy : {"equal", "proportional", "boa", "lbb"}) {
      for (int workers : {4, 64, 1024}) {
        const Cost c = measure(root + "/scripts/policies/" + policy + ".lua", workers, workers >= 1024 ? 50 : iterations);
        std::printf("%-12s %5d workers: %8.3f ms mean, %8.3f ms median, %8.3f ms max per decision\n", policy, workers,
                    c.mean_ms, c.p50_ms, c.max_ms);
        result["policies"][policy][std::to_string(workers)] = {
            {"mean_ms", c.mean_ms}, {"p50_ms", c.p50_ms}, {"max_ms", c.max_ms}};
      }
    }
    for (int workers : {4, 64, 1024}) {
      const Cost c = measure(root + "/tools/bench/minmax_probe.lua", workers, workers >= 1024 ? 50 : iterations);
      std::printf("min-max solve %5d workers: %8.3f ms mean (interpreted, in the sandbox)\n", workers, c.solve_mean_ms);
      result["minmax_solve_ms"][std::to_string(workers)] = c.solve_mean_ms;
    }
    if (!out.empty()) std::ofstream(out) << result.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem_policy_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
