// Several ranks end to end, through the tandem binary and its own mpirun launch:
// every worker in the traces, an emulated straggler visible where it was
// scheduled, a hung rank named at the deadline, and the single-rank fast path.
#define BOOST_TEST_MODULE workers
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/test_support.hpp"

using namespace tandem::testing;
using nlohmann::json;

namespace {

const TempDir& scratch() {
  static TempDir dir("workers");
  return dir;
}

// Runs tandem; returns its exit status and leaves its output in <name>.log.
int tandem_run(const std::string& name, const std::string& experiment, const std::string& args) {
  const std::string cmd = "timeout 300 " + std::string(TANDEM_BINARY) + " run " + experiment +
                          " model_args.hidden=64 eval_every=100000 stop.target_accuracy=1 log_level=warn --out " +
                          scratch().file(name) + " " + args + " > " + scratch().file(name + ".log") + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string quickstart() { return std::string(TANDEM_SOURCE_DIR) + "/scripts/experiments/quickstart.lua"; }

json read_json(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "missing " << path);
  return json::parse(in);
}

std::vector<json> iterations(const std::string& run) {
  std::vector<json> out;
  std::ifstream in(scratch().file(run) + "/trace.jsonl");
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    if (j["event"] == "iteration") out.push_back(j);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

BOOST_AUTO_TEST_CASE(traces_hold_every_worker) {
  BOOST_REQUIRE_EQUAL(tandem_run("fixed", quickstart(),
                                 "--workers 4 global_batch=256 stop.max_iterations=30 plan.kind=fixed "
                                 "plan.batches=16,48,64,128"),
                      0);
  const json summary = read_json(scratch().file("fixed") + "/summary.json");
  BOOST_TEST(summary["workers"] == 4);
  BOOST_TEST(summary["iterations"] == 30);
  const auto rows = iterations("fixed");
  BOOST_REQUIRE_EQUAL(rows.size(), 30u);
  const int64_t plan[4] = {16, 48, 64, 128};
  for (const json& row : rows) {
    BOOST_TEST(row["global_batch"] == 256);
    BOOST_TEST(std::isfinite(row["loss"].get<double>()));
    BOOST_REQUIRE_EQUAL(row["workers"].size(), 4u);
    for (int r = 0; r < 4; ++r) {
      const json& w = row["workers"][r];
      BOOST_TEST(w["rank"] == r);
      BOOST_TEST(w["local_batch"] == plan[r]);
      BOOST_TEST(w["compute_ms"].get<double>() > 0.0);
      BOOST_TEST(w["idle_ms"].get<double>() >= 0.0);
      BOOST_TEST(w["comm_ms"].get<double>() > 0.0);
    }
  }
  // The Perfetto file: a named track per worker, compute spans on each.
  const json perfetto = read_json(scratch().file("fixed") + "/trace.perfetto.json");
  int tracks = 0, compute_spans[4] = {0, 0, 0, 0};
  for (const json& e : perfetto["traceEvents"]) {
    if (e["name"] == "thread_name") ++tracks;
    if (e["ph"] == "X") {
      BOOST_TEST(e["dur"].get<double>() >= 0.0);
      if (e["name"] == "compute") ++compute_spans[e["tid"].get<int>()];
    }
  }
  BOOST_TEST(tracks == 4);
  for (int r = 0; r < 4; ++r) BOOST_TEST(compute_spans[r] == 30);
}

BOOST_AUTO_TEST_CASE(scheduled_straggler_shows_where_scheduled) {
  const std::string exp = scratch().write("event.lua", R"(return {
  model = 'mlp', global_batch = 256, workers = 4, stop = { max_iterations = 40 },
  emulation = { reference = 0.25, events = { { worker = 3, speed = 0.25, from = 10, to = 20 } } },
})");
  BOOST_REQUIRE_EQUAL(tandem_run("event", exp, ""), 0);
  const auto rows = iterations("event");
  BOOST_REQUIRE_EQUAL(rows.size(), 40u);
  std::vector<double> slow, normal, others_idle_in, others_idle_out;
  for (const json& row : rows) {
    const int64_t t = row["iteration"];
    const json& w3 = row["workers"][3];
    if (t >= 12 && t < 19) {
      slow.push_back(w3["compute_ms"]);
      BOOST_TEST(w3["speed"].get<double>() == 0.25);
      others_idle_in.push_back(row["workers"][0]["idle_ms"]);
    } else if (t >= 25) {
      normal.push_back(w3["compute_ms"]);
      BOOST_TEST(w3["speed"].get<double>() == 1.0);
      others_idle_out.push_back(row["workers"][0]["idle_ms"]);
    }
  }
  BOOST_TEST(median(slow) > 2.5 * median(normal));
  BOOST_TEST(median(others_idle_in) > median(others_idle_out) + 0.5 * median(normal));
}

BOOST_AUTO_TEST_CASE(a_hung_rank_is_named_at_the_deadline) {
  const int rc = tandem_run("hang", quickstart(),
                            "--workers 3 emulation.speeds=1,1,0.00002 emulation.reference=1 collective_timeout_s=2 "
                            "stop.max_iterations=20");
  BOOST_TEST(rc != 0);
  std::ifstream in(scratch().file("hang.log"));
  std::stringstream log;
  log << in.rdbuf();
  CHECK_CONTAINS(log.str(), "missing rank(s): 2");
  CHECK_CONTAINS(log.str(), "collective_timeout_s");
}

BOOST_AUTO_TEST_CASE(one_rank_takes_the_fast_path) {
  BOOST_REQUIRE_EQUAL(tandem_run("single", quickstart(), "stop.max_iterations=20"), 0);
  const json summary = read_json(scratch().file("single") + "/summary.json");
  BOOST_TEST(summary["workers"] == 1);
  BOOST_TEST(summary["comm_share"].get<double>() == 0.0);
  BOOST_TEST(summary["idle_share"].get<double>() == 0.0);
}
