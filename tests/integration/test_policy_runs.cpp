// Lua policies end to end through the tandem binary, several ranks: a policy's plans
// reach every rank on the documented schedule and train exactly what one rank
// trains; a policy that fails every call never stops training; a policy file that
// changes during the run is swapped in with its state; lbb balances an emulated
// heterogeneous cluster. Runs are short (a 64-unit MLP, tens of iterations).
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/clock.hpp"
#include "tests/integration/tandem_run.hpp"

BOOST_AUTO_TEST_SUITE(test_policy_runs)  // ctest's integration.policy_runs (tests/integration/CMakeLists.txt)

using namespace tandem::testing;

namespace {

std::vector<int64_t> batches(const json& row) {
  std::vector<int64_t> b;
  for (const json& w : row["workers"]) b.push_back(w["local_batch"].get<int64_t>());
  return b;
}

// Every 4th iteration's stats: the big share moves to the next worker.
const char* kCycle = R"(local P = {}
function P.init(c) P.n, P.B = c.workers, c.global_batch end
function P.step(stats)
  local t = stats.iteration
  if t % 4 ~= 0 then return nil end
  local k = (t / 4) % P.n
  local b = {}
  for i = 1, P.n do b[i] = 8 end
  b[k + 1] = P.B - 8 * (P.n - 1)
  return { local_batch = b, reason = 'big share to ' .. k }
end
return P
)";

}  // namespace

BOOST_AUTO_TEST_CASE(plans_reach_every_rank_on_schedule_and_train_the_same) {
  const std::string policy = scratch().write("cycle.lua", kCycle);
  const std::string common = std::string(" global_batch=96 stop.max_iterations=30 save_params=true") + kPatientPolicy;
  require_ok(run_tandem("cycle3", quickstart(), "--workers 3 policy.file=" + policy + common));
  require_ok(run_tandem("one", quickstart(), "--workers 1" + common));

  const auto rows = iterations("cycle3");
  BOOST_REQUIRE_EQUAL(rows.size(), 30u);
  int plans = 0;
  for (size_t t = 0; t < rows.size(); ++t) {
    const json& row = rows[t];
    // Every iteration's stats but the last get a decision, in force two iterations on.
    BOOST_REQUIRE_MESSAGE(row.contains("policy") == (t + 1 < rows.size()), "policy record or not at iteration " << t);
    if (t + 1 == rows.size()) continue;
    const json& p = row["policy"];
    BOOST_TEST(p["from_iteration"] == static_cast<int64_t>(t));
    BOOST_TEST(p["applies_from"] == static_cast<int64_t>(t) + 2);
    BOOST_TEST(p["cost_ms"].get<double>() >= 0.0);
    if (p["event"] == "plan") {
      ++plans;
      if (t + 2 < rows.size())
        BOOST_TEST(batches(rows[t + 2]) == p["plan"].get<std::vector<int64_t>>(), boost::test_tools::per_element());
      BOOST_TEST(p["reason"].get<std::string>().rfind("big share to", 0) == 0);
    }
  }
  BOOST_TEST(plans >= 6);
  // Any sequence of plans trains what one rank with the whole batch trains.
  const std::vector<float> a = params_of("cycle3"), b = params_of("one");
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  BOOST_TEST(worst < 1e-5, "largest parameter difference " << worst);
  const json s = summary_of("cycle3");
  BOOST_TEST(s["policy"]["name"] == "cycle");
  BOOST_TEST(s["policy"]["failures"] == 0);
}

BOOST_AUTO_TEST_CASE(a_policy_failing_every_call_never_stops_training) {
  const std::string policy = scratch().write("broken.lua", R"(return {
  init = function(c) end,
  step = function(stats) error('model fit diverged') end })");
  const RunResult r = run_tandem("broken", quickstart(),
                                 "--workers 2 global_batch=64 stop.max_iterations=20 policy.file=" + policy + kPatientPolicy);
  require_ok(r);
  CHECK_CONTAINS(r.output, "model fit diverged");
  CHECK_CONTAINS(r.output, "failed 3 times in a row");
  const json s = summary_of("broken");
  BOOST_TEST(s["iterations"] == 20);
  BOOST_TEST(s["policy"]["failures"] == 3);
  BOOST_TEST(s["policy"]["last_event"] == "disabled");
  for (const json& row : iterations("broken"))
    BOOST_TEST(batches(row) == (std::vector<int64_t>{32, 32}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_policy_file_changed_during_the_run_is_swapped_in_with_its_state) {
  // A user edits the policy file while the run goes on: this test rewrites it once
  // the trace shows iteration 6 (policies cannot write files). Version 1 takes 150 ms
  // a step from then on, so the run is still going when the file changes; version 2
  // gets version 1's count through save/restore.
  const std::string path = scratch().file("self.lua");
  const std::string v2 = R"(local P = {}
function P.init(c) P.B = c.global_batch end
function P.restore(s) P.count = s.count end
function P.step(stats) return { local_batch = { P.B - 16, 8, 8 }, reason = 'v2 after ' .. P.count } end
return P
)";
  const std::string v1 = R"(local P = { count = 0 }
function P.init(c) end
function P.save() return { count = P.count } end
function P.step(stats)
  P.count = P.count + 1
  if stats.iteration >= 6 then local t = os.clock() + 0.15; while os.clock() < t do end end
end
return P
)";
  scratch().write("self.lua", v1);
  std::filesystem::remove_all(scratch().file("swap"));
  std::atomic<bool> done{false};
  std::thread editor([&] {
    const double give_up = tandem::now_ms() + 300000.0;
    while (!done && tandem::now_ms() < give_up) {
      // The trace as far as it is written (a line may be cut short: skipped).
      bool past_six = false;
      std::ifstream in(scratch().file("swap") + "/trace.jsonl");
      for (std::string line; std::getline(in, line);) {
        const json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
        past_six |= row.is_object() && row.value("event", "") == "iteration" && row.value("iteration", -1) >= 6;
      }
      if (past_six) {
        scratch().write("self.lua.new", v2);
        std::filesystem::rename(scratch().file("self.lua.new"), path);  // whole, as an editor saves
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const RunResult r = run_tandem("swap", quickstart(), "--workers 3 global_batch=96 stop.max_iterations=60 log_every=1 "
                                 "policy.file=" + path + kPatientPolicy);
  done = true;
  editor.join();
  require_ok(r);
  const auto rows = iterations("swap");
  size_t swapped_at = 0;
  for (size_t t = 0; t < rows.size(); ++t)
    if (rows[t].contains("policy") && rows[t]["policy"]["event"] == "swapped") swapped_at = t;
  BOOST_REQUIRE_MESSAGE(swapped_at > 0, "no swap in the trace");
  // v1 stepped on every iteration before the swap; v2's dry run is on the swap's.
  BOOST_TEST(swapped_at >= 7u);
  BOOST_TEST(rows[swapped_at]["policy"]["reason"] == "v2 after " + std::to_string(swapped_at));
  for (size_t t = swapped_at + 2; t < rows.size(); ++t)
    BOOST_TEST(batches(rows[t]) == (std::vector<int64_t>{80, 8, 8}), boost::test_tools::per_element());
  BOOST_TEST(summary_of("swap")["policy"]["swaps"] == 1);
}

BOOST_AUTO_TEST_CASE(lbb_balances_an_emulated_cluster) {
  // Speeds 1, 1, 0.5, 0.25 of a quarter-core device: the equal split leaves the
  // slowest worker 4 times the others' compute; lbb evens it out. The calibration is
  // fixed, so the compute times lbb sees (and the plans it makes of them) are the
  // emulation's, whatever else this machine runs; with the measured one (tenths of a
  // ms) a loaded core showed through and lbb balanced noise.
  const std::vector<double> speed = {1, 1, 0.5, 0.25};
  const double reference = 0.25;
  const int64_t global_batch = 256;
  const std::string common = "--workers 4 global_batch=256 stop.max_iterations=60 emulation.speeds=1,1,0.5,0.25 "
                             "emulation.reference=0.25" + fixed_calibration() + kPatientPolicy;
  require_ok(run_tandem("lbb", quickstart(), common + " policy.file=lbb"));
  const auto rows = iterations("lbb");
  BOOST_REQUIRE_EQUAL(rows.size(), 60u);
  std::vector<double> spread;
  for (size_t t = 30; t < rows.size(); ++t) {
    double lo = 1e30, hi = 0.0;
    for (const json& w : rows[t]["workers"]) {
      lo = std::min(lo, w["compute_ms"].get<double>());
      hi = std::max(hi, w["compute_ms"].get<double>());
    }
    spread.push_back(hi / lo);
  }
  BOOST_TEST(median(spread) < 1.25, "max/min compute time, median over iterations 30-59: " << median(spread));
  // The step time lbb's last plan costs is within 5% of the best split's: every
  // worker finishing at T, sum_i (T reference speed_i - fixed) / per_sample = B.
  const std::vector<int64_t> last = batches(rows.back());
  double speeds = 0.0, slowest = 0.0;
  for (size_t i = 0; i < speed.size(); ++i) {
    speeds += speed[i];
    slowest = std::max(slowest, emulated_compute_ms(double(last[i]), speed[i], reference));
  }
  const double balanced =
      (kCalibrationPerSampleMs * global_batch + kCalibrationFixedMs * speed.size()) / (reference * speeds);
  BOOST_TEST(slowest < 1.05 * balanced, "last plan's slowest compute " << slowest << " ms, balanced " << balanced);
  // Faster workers take more; with the 2 ms fixed cost, balance gives a speed-1
  // worker 20 samples more than twice a speed-0.5 worker's.
  BOOST_TEST(last[0] > 2 * last[2]);
  BOOST_TEST(last[2] > last[3]);
}

BOOST_AUTO_TEST_SUITE_END()  // test_policy_runs
