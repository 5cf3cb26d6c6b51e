// What running a policy in its own process (engine/script/policy_process.hpp) adds to
// one decision: the same policy on the same stats, in the worker process and in a
// sandbox in this process, interleaved decision by decision so both see the same
// machine. The added cost is the difference of the two means (the round trip, the
// stats' encoding, the worker's scheduling), at 4, 64 and 1024 workers.
//
// usage: tandem_policy_isolation_bench [--iterations 400] [--out FILE]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/script/lua_state.hpp"
#include "engine/script/policy_process.hpp"

using namespace tandem;

namespace {

struct Sides {
  double in_process_ms = 0.0, worker_ms = 0.0, worker_p50_ms = 0.0, inside_worker_ms = 0.0;
};

std::vector<WorkerStats> synthetic_stats(int workers, int t) {
  std::vector<WorkerStats> s(static_cast<size_t>(workers));
  for (int r = 0; r < workers; ++r) {
    WorkerStats& w = s[static_cast<size_t>(r)];
    w.rank = r;
    w.valid = 1;
    w.iteration = t;
    w.local_batch = 128;
    w.compute_ms = 10.0 + (r % 4) * 3.0 + 0.01 * (t % 7);
    w.samples_per_s = 128.0 / w.compute_ms * 1000.0;
    w.step_ms = 40.0;
  }
  return s;
}

Sides measure(const std::string& file, int workers, int iterations) {
  PolicyCluster c;
  c.workers = workers;
  c.global_batch = 128LL * workers;
  c.min_batch.assign(static_cast<size_t>(workers), 0);
  c.max_batch.assign(static_cast<size_t>(workers), c.global_batch);
  c.devices.assign(static_cast<size_t>(workers), "synthetic");
  const PolicyLimits limits{10000.0, 1024.0};
  PolicySandbox local(file, limits);
  PolicyProcess remote(file, limits);
  local.init(c);
  remote.init(c);
  std::vector<double> in_process, worker, inside;
  for (int t = 0; t < iterations; ++t) {
    const auto stats = synthetic_stats(workers, t);
    double start = now_ms();
    local.step(t, c.global_batch, stats);
    in_process.push_back(now_ms() - start);
    start = now_ms();
    remote.step(t, c.global_batch, stats);
    worker.push_back(now_ms() - start);
    inside.push_back(remote.last_call_ms());
  }
  Sides s;
  for (size_t i = 0; i < worker.size(); ++i) {
    s.in_process_ms += in_process[i] / static_cast<double>(worker.size());
    s.worker_ms += worker[i] / static_cast<double>(worker.size());
    s.inside_worker_ms += inside[i] / static_cast<double>(worker.size());
  }
  std::sort(worker.begin(), worker.end());
  s.worker_p50_ms = worker[worker.size() / 2];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 400;
  std::string out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--iterations") iterations = std::stoi(argv[i + 1]);
    else if (a == "--out") out = argv[i + 1];
  }
  try {
    nlohmann::json result{{"benchmark", "policy_isolation"}, {"iterations", iterations}};
    for (const char* policy : {"equal", "lbb"}) {
      for (int workers : {4, 64, 1024}) {
        const Sides s = measure(tandem_root() + "/scripts/policies/" + policy + ".lua", workers,
                                workers >= 1024 ? iterations / 8 : iterations);
        std::printf("%-6s %5d workers: in process %7.3f ms, in its worker %7.3f ms (median %7.3f; the Lua part "
                    "%7.3f): %+7.3f ms a decision\n", policy, workers, s.in_process_ms, s.worker_ms, s.worker_p50_ms,
                    s.inside_worker_ms, s.worker_ms - s.in_process_ms);
        result["policies"][policy][std::to_string(workers)] = {{"in_process_ms", s.in_process_ms},
                                                               {"worker_ms", s.worker_ms},
                                                               {"worker_p50_ms", s.worker_p50_ms},
                                                               {"inside_worker_ms", s.inside_worker_ms},
                                                               {"added_ms", s.worker_ms - s.in_process_ms}};
      }
    }
    if (!out.empty()) std::ofstream(out) << result.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem_policy_isolation_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
