// Several ranks end to end through the tandem binary: what the traces hold for every
// worker (trace.jsonl and trace.perfetto.json), emulated heterogeneity where it was
// asked for (a scheduled slowdown, a proportional plan from static speeds, a
// communication delay), a hung rank named at the collective deadline, the same
// binary under an external mpirun, and the single-rank fast path.
// Runs are short (30-60 iterations of a 64-unit MLP) so the file fits in about a
// minute on two cores.
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/tandem_run.hpp"

BOOST_AUTO_TEST_SUITE(test_distributed)  // ctest's integration.distributed (tests/integration/CMakeLists.txt)

using namespace tandem::testing;
using nlohmann::json;

namespace {

// An experiment file: the Lua table `body` returns (events are only settable there).
std::string experiment_file(const std::string& name, const std::string& body) {
  return scratch().write(name + ".lua", "return " + body + "\n");
}

// The time of day (s) that `rank` ("[r0]"; "[r" for any rank) logged the first line
// containing `what` at ("HH:MM:SS.mmm [r0] ..."); -1 when it logged none.
double logged_at(const std::string& output, const std::string& what, const std::string& rank = "[r0]") {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    int h = 0, m = 0;
    double s = 0;
    if (line.find(rank) == std::string::npos || line.find(what) == std::string::npos) continue;
    if (std::sscanf(line.c_str(), "%d:%d:%lf", &h, &m, &s) == 3) return h * 3600.0 + m * 60.0 + s;
  }
  return -1;
}

}  // namespace

BOOST_AUTO_TEST_CASE(trace_has_every_worker) {
  const int N = 30;
  require_ok(run_tandem("fixed", quickstart(),
                        "--workers 4 global_batch=256 stop.max_iterations=" + std::to_string(N) +
                            " plan.kind=fixed plan.batches=16,48,64,128"));
  const json summary = summary_of("fixed");
  BOOST_TEST(summary["workers"] == 4);
  BOOST_TEST(summary["iterations"] == N);

  const auto rows = iterations("fixed");
  BOOST_REQUIRE_EQUAL(rows.size(), size_t(N));
  const int64_t plan[4] = {16, 48, 64, 128};
  for (const json& row : rows) {
    BOOST_TEST(row["global_batch"] == 256);
    BOOST_TEST(std::isfinite(row["loss"].get<double>()));
    BOOST_REQUIRE_EQUAL(row["workers"].size(), 4u);
    int64_t sum = 0;
    for (int r = 0; r < 4; ++r) {
      const json& w = row["workers"][r];
      BOOST_TEST(w["rank"] == r);
      BOOST_TEST(w["local_batch"] == plan[r], "iteration " << row["iteration"] << " rank " << r);
      BOOST_TEST(w["compute_ms"].get<double>() > 0.0);
      BOOST_TEST(w["idle_ms"].get<double>() >= 0.0);
      BOOST_TEST(w["comm_ms"].get<double>() >= 0.0);
      BOOST_TEST(std::isfinite(w["loss_sum"].get<double>()));
      sum += w["local_batch"].get<int64_t>();
    }
    BOOST_TEST(sum == 256);
  }

  // Perfetto: valid JSON, a named track per worker, compute spans on each track.
  const json perfetto = read_json(scratch().file("fixed") + "/trace.perfetto.json");
  BOOST_REQUIRE(perfetto.contains("traceEvents"));
  BOOST_REQUIRE(perfetto["traceEvents"].is_array());
  std::set<int> named;
  std::map<int, int> compute_spans;
  std::set<std::string> span_names;
  for (const json& e : perfetto["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") named.insert(e["tid"].get<int>());
    if (e.value("ph", "") == "X") {
      BOOST_TEST(e["ts"].get<double>() >= 0.0);
      BOOST_TEST(e["dur"].get<double>() >= 0.0);
      span_names.insert(e["name"].get<std::string>());
      if (e["name"] == "compute") ++compute_spans[e["tid"].get<int>()];
    }
  }
  BOOST_TEST(named == (std::set<int>{0, 1, 2, 3}));
  for (int r = 0; r < 4; ++r) BOOST_TEST(compute_spans[r] == N, "compute spans on tid " << r);
  BOOST_TEST(span_names.count("compute") == 1u);
  BOOST_TEST(span_names.count("comm") == 1u);
}

BOOST_AUTO_TEST_CASE(scheduled_event_slows_one_worker) {
  // A fixed calibration (tandem_run.hpp): worker 3's compute is the emulated 33.6 ms
  // out of the event and 134.4 ms in it, whatever else this machine runs; stretching
  // the measured tenths of a ms left the real scheduling noise comparable to them.
  const double reference = 0.25;
  const std::string exp = experiment_file("event", R"({
  model = 'mlp', model_args = { hidden = 64 }, global_batch = 256, workers = 4,
  emulation = { reference = 0.25, )" + fixed_calibration_lua() + R"(,
                events = { { worker = 3, speed = 0.25, from = 10, to = 20 } } },
  stop = { max_iterations = 30, target_accuracy = 1 }, eval_every = 100000, log_level = 'warn',
})");
  require_ok(run_tandem("event", exp, ""));
  const auto rows = iterations("event");
  BOOST_REQUIRE_EQUAL(rows.size(), 30u);

  std::vector<double> slow, normal;
  std::vector<double> idle_in[3], idle_out[3];
  for (const json& row : rows) {
    const int64_t t = row["iteration"];
    BOOST_REQUIRE_EQUAL(row["workers"].size(), 4u);
    const json& w3 = row["workers"][3];
    const bool active = t >= 10 && t < 20;
    BOOST_TEST(w3["speed"].get<double>() == (active ? 0.25 : 1.0), "worker 3 speed at iteration " << t);
    for (int r = 0; r < 3; ++r) BOOST_TEST(row["workers"][r]["speed"].get<double>() == 1.0);
    if (t >= 12 && t <= 18) {
      slow.push_back(w3["compute_ms"]);
      for (int r = 0; r < 3; ++r) idle_in[r].push_back(row["workers"][r]["idle_ms"]);
    } else if (t >= 25 && t <= 29) {
      normal.push_back(w3["compute_ms"]);
    }
    if (t >= 25 && t <= 29)
      for (int r = 0; r < 3; ++r) idle_out[r].push_back(row["workers"][r]["idle_ms"]);
  }
  BOOST_REQUIRE_EQUAL(slow.size(), 7u);
  BOOST_REQUIRE_EQUAL(normal.size(), 5u);
  // compute_ms is the emulated time unless the real step outlasted it (100 times its
  // idle-machine length): never below it, and so at the median of five.
  const double normal_ms = emulated_compute_ms(64, 1.0, reference), slow_ms = emulated_compute_ms(64, 0.25, reference);
  std::cout << "event: worker 3 compute_ms during event (min) " << *std::min_element(slow.begin(), slow.end())
            << ", median after " << median(normal) << std::endl;
  for (size_t i = 0; i < slow.size(); ++i)
    BOOST_TEST(slow[i] >= slow_ms * (1 - 1e-6), "iteration " << 12 + i << ": " << slow[i] << " ms vs " << slow_ms);
  BOOST_TEST(median(normal) == normal_ms, boost::test_tools::tolerance(1e-6));
  // The others wait for worker 3 while it is slow: 3 x normal_ms more than after it.
  for (int r = 0; r < 3; ++r) {
    std::cout << "event: rank " << r << " idle median in " << median(idle_in[r]) << " out " << median(idle_out[r])
              << std::endl;
    BOOST_TEST(median(idle_in[r]) > median(idle_out[r]) + 0.5 * normal_ms, "rank " << r);
  }
}

BOOST_AUTO_TEST_CASE(proportional_plan_follows_speeds) {
  // The plan comes from the calibration: a fixed one (tandem_run.hpp) makes it the
  // same on any machine in any state.
  require_ok(run_tandem("proportional", quickstart(),
                        "--workers 4 global_batch=256 stop.max_iterations=30 emulation.speeds=1,1,0.5,0.25 "
                        "emulation.reference=0.25 plan.kind=proportional" + fixed_calibration()));
  const double speed[4] = {1, 1, 0.5, 0.25};
  const auto rows = iterations("proportional");
  BOOST_REQUIRE_EQUAL(rows.size(), 30u);
  for (const json& row : rows) {
    BOOST_REQUIRE_EQUAL(row["workers"].size(), 4u);
    int64_t b[4], sum = 0;
    for (int r = 0; r < 4; ++r) sum += b[r] = row["workers"][r]["local_batch"].get<int64_t>();
    const int64_t t = row["iteration"];
    BOOST_TEST(sum == 256, "iteration " << t);
    BOOST_TEST(std::abs(b[0] - b[1]) <= std::max<int64_t>(2, b[0] / 20),
               "iteration " << t << ": b0 " << b[0] << " b1 " << b[1]);
    BOOST_TEST(std::min(b[0], b[1]) > b[2], "iteration " << t << ": " << b[1] << " vs " << b[2]);
    BOOST_TEST(b[2] > b[3], "iteration " << t << ": " << b[2] << " vs " << b[3]);
    BOOST_REQUIRE(b[3] > 0);
    // Proportional to what each worker does per ms of its emulated compute: every
    // worker's compute takes as long (to a sample of the slowest worker, 3%), the
    // calibration's fixed cost included; it gives worker 3 far less than a quarter.
    double lo = 1e30, hi = 0.0;
    for (int r = 0; r < 4; ++r) {
      const double ms = emulated_compute_ms(double(b[r]), speed[r], 0.25);
      lo = std::min(lo, ms);
      hi = std::max(hi, ms);
    }
    BOOST_TEST(hi / lo < 1.05, "iteration " << t << ": emulated compute from " << lo << " to " << hi << " ms");
  }
  const json& last = rows.back()["workers"];
  std::cout << "proportional: " << last[0]["local_batch"] << "," << last[1]["local_batch"] << ","
            << last[2]["local_batch"] << "," << last[3]["local_batch"] << std::endl;
}

BOOST_AUTO_TEST_CASE(comm_delay_shows_as_comm) {
  require_ok(run_tandem("delay", quickstart(),
                        "--workers 2 global_batch=128 stop.max_iterations=30 emulation.comm_delay_ms=0,20"));
  const auto rows = iterations("delay");
  BOOST_REQUIRE_EQUAL(rows.size(), 30u);
  std::vector<double> comm[2];
  for (const json& row : rows) {
    BOOST_REQUIRE_EQUAL(row["workers"].size(), 2u);
    if (row["iteration"].get<int64_t>() < 3) continue;
    for (int r = 0; r < 2; ++r) comm[r].push_back(row["workers"][r]["comm_ms"]);
  }
  for (int r = 0; r < 2; ++r) {
    std::cout << "delay: rank " << r << " median comm_ms " << median(comm[r]) << std::endl;
    // A collective is as slow as its slowest link: rank 0 (no delay of its own) waits too.
    BOOST_TEST(median(comm[r]) >= 20.0, "rank " << r);
  }
  BOOST_TEST(summary_of("delay")["comm_share"].get<double>() > 0.0);
}

BOOST_AUTO_TEST_CASE(hang_is_named) {
  // Rank 2 at 1e-6 of a core: its first step takes about 90 s (the small model
  // computes in ~0.1 ms), far past the 3 s deadline, which must fire in the first
  // iteration already (set-up collectives happen before it). Timed from the log,
  // from training's start to the abort: mpirun's start on a loaded machine took over
  // a minute here, and the command's wall time measured that.
  const RunResult r = run_tandem("hang", quickstart(),
                                 "--workers 3 global_batch=96 stop.max_iterations=30 emulation.speeds=1,1,0.000001 "
                                 "emulation.reference=1 collective_timeout_s=3 log_level=info",
                                 "", 300);
  BOOST_TEST(r.status != 0);
  BOOST_TEST(r.status != 124, "killed by timeout 300 instead of the collective deadline");
  CHECK_CONTAINS(r.output, "missing rank(s): 2");
  CHECK_CONTAINS(r.output, "collective_timeout_s");
  CHECK_CONTAINS(r.output, "the gradient all-reduce did not complete");
  // Any rank that waits on rank 2 may abort first (rank 1 did, with twelve tests on
  // 2 cores); every rank's first all-reduce follows the set-up collectives, which
  // follow rank 0's start line.
  const double started = logged_at(r.output, "workers over"), aborted = logged_at(r.output, "aborting the job", "[r");
  BOOST_REQUIRE_MESSAGE(started >= 0 && aborted >= 0, "no start or abort line in the log:\n" << r.output);
  const double waited = aborted >= started ? aborted - started : aborted - started + 86400;  // past midnight
  // Rank 0's all-reduce began after its start line: not before the deadline (log
  // stamps are to the ms), and long before rank 2's first step could end, so only
  // the first iteration's all-reduce can have fired it.
  BOOST_TEST(waited >= 2.99);
  BOOST_TEST(waited < 30.0);
}

BOOST_AUTO_TEST_CASE(external_mpirun) {
  // PMIx's native security, as docs/hosts.md tells users of their own mpirun: munge
  // (installed for the Slurm test) without its daemon costs every start 2.3 s.
  const std::string mpirun =
      "env PMIX_MCA_psec=native mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader "
      "--mca btl_vader_single_copy_mechanism none -x OPENBLAS_NUM_THREADS=1 ";
  require_ok(run_tandem("external", quickstart(), "global_batch=128 stop.max_iterations=30", mpirun));
  const json summary = summary_of("external");
  BOOST_TEST(summary["workers"] == 2);
  BOOST_TEST(summary["iterations"] == 30);
  const auto rows = iterations("external");
  BOOST_REQUIRE_EQUAL(rows.size(), 30u);
  for (const json& row : rows) {
    BOOST_REQUIRE_EQUAL(row["workers"].size(), 2u);
    BOOST_TEST(row["workers"][0]["local_batch"].get<int64_t>() + row["workers"][1]["local_batch"].get<int64_t>() ==
               128);
    BOOST_TEST(std::isfinite(row["loss"].get<double>()));
  }
  BOOST_TEST(rows.back()["loss"].get<double>() < rows.front()["loss"].get<double>());
}

BOOST_AUTO_TEST_CASE(single_rank_fast_path) {
  require_ok(run_tandem("single", quickstart(), "--workers 1 stop.max_iterations=30"));
  const json summary = summary_of("single");
  BOOST_TEST(summary["workers"] == 1);
  BOOST_TEST(summary["iterations"] == 30);
  BOOST_TEST(summary["comm_share"].get<double>() == 0.0);
  BOOST_TEST(summary["idle_share"].get<double>() == 0.0);
  for (const json& row : iterations("single")) {
    BOOST_REQUIRE_EQUAL(row["workers"].size(), 1u);
    BOOST_TEST(row["workers"][0]["comm_ms"].get<double>() == 0.0);
    BOOST_TEST(row["workers"][0]["idle_ms"].get<double>() == 0.0);
  }
}

BOOST_AUTO_TEST_SUITE_END()  // test_distributed
