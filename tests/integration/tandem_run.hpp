#pragma once
// Running the tandem binary from a Boost.Test file (tests/integration): a scratch
// folder per test process, a run with the small-model overrides these tests share,
// and readers for what a run leaves (summary.json, the trace's iteration lines).
// Include after <boost/test/unit_test.hpp>.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/test_support.hpp"

namespace tandem::testing {

using nlohmann::json;

// One per process: ctest runs each suite of integration_tests in a process of its own.
inline const TempDir& scratch() {
  static TempDir dir("integration");
  return dir;
}

inline std::string quickstart() { return std::string(TANDEM_SOURCE_DIR) + "/scripts/experiments/quickstart.lua"; }

// The overrides every run here shares: small model, no evaluations, quiet.
inline const char* const kSmall = " model_args.hidden=64 eval_every=100000 stop.target_accuracy=1 log_level=warn";

// A machine calibration given instead of measured at start-up: forward + backward
// take kCalibrationFixedMs + kCalibrationPerSampleMs a sample, about 40 times what
// the 64-unit MLP really takes here. An emulated worker's step is stretched to this
// time (over reference x speed), and a real step only shows through when it outlasts
// that, so on a loaded machine a step preempted for tens of ms still records its
// emulated time: compute_ms becomes a pure function of local batch and speed, and
// so do the plans a policy derives from it.
constexpr double kCalibrationFixedMs = 2.0;
constexpr double kCalibrationPerSampleMs = 0.1;
inline std::string fixed_calibration_ms() {  // at batches 1 and 256
  const auto ms = [](int b) { return std::to_string(kCalibrationFixedMs + kCalibrationPerSampleMs * b); };
  return ms(1) + "," + ms(256);
}
// As command-line overrides, and as the field of an experiment's emulation table.
inline std::string fixed_calibration() {
  return " emulation.calibration.batch=1,256 emulation.calibration.ms=" + fixed_calibration_ms() +
         " emulation.calibration.host_ms=0.1,0.1";
}
inline std::string fixed_calibration_lua() {
  return "calibration = { batch = { 1, 256 }, ms = { " + fixed_calibration_ms() + " }, host_ms = { 0.1, 0.1 } }";
}
// The compute_ms fixed_calibration() gives a worker at `speed` on a reference device
// of `reference` cores.
inline double emulated_compute_ms(double local_batch, double speed, double reference) {
  return (kCalibrationFixedMs + kCalibrationPerSampleMs * local_batch) / (reference * speed);
}

// For runs with a policy whose time budget is not what they test. The budget counts
// CPU time, which a loaded machine does not use up, but a slow one still stretches
// the CPU work of a call, and a failure would change the plan sequence. (The budget
// itself: tests/unit/test_policy_host.cpp.)
inline const char* const kPatientPolicy = " policy.budget_ms=2000";

struct RunResult {
  int status = -1;    // exit status, -1 when killed by a signal
  double seconds = 0; // wall time of the whole command
  std::string output; // stdout and stderr together
};

// The device these runs compute on: the CPU (the reference) unless TANDEM_TEST_DEVICE
// says otherwise (TANDEM_TEST_DEVICE=cuda ctest -L integration runs them on a GPU).
inline std::string test_device() {
  const char* d = std::getenv("TANDEM_TEST_DEVICE");
  return d && *d ? d : "cpu";
}

// Runs `prefix TANDEM_BINARY run EXPERIMENT OVERRIDES --out DIR ARGS`, output to
// <name>.log. prefix: e.g. an external mpirun; the command is under `timeout`.
inline RunResult run_tandem_with(const std::string& name, const std::string& experiment, const char* overrides,
                                 const std::string& args, const std::string& prefix = "", int timeout_s = 120) {
  const std::string log = scratch().file(name + ".log");
  const std::string cmd = "timeout " + std::to_string(timeout_s) + " " + prefix + std::string(TANDEM_BINARY) +
                          " run " + experiment + overrides + " device=" + test_device() + " --out " +
                          scratch().file(name) + " " + args + " > " + log + " 2>&1";
  BOOST_TEST_MESSAGE(cmd);
  RunResult r;
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  r.output = text.str();
  std::cout << "run " << name << ": exit " << r.status << " in " << r.seconds << " s" << std::endl;
  return r;
}

// The same with the small MLP's overrides (kSmall), what most tests train.
inline RunResult run_tandem(const std::string& name, const std::string& experiment, const std::string& args,
                            const std::string& prefix = "", int timeout_s = 120) {
  return run_tandem_with(name, experiment, kSmall, args, prefix, timeout_s);
}

// Requires a successful run, showing its output when it failed.
inline void require_ok(const RunResult& r) {
  BOOST_REQUIRE_MESSAGE(r.status == 0, "tandem exited " << r.status << ":\n" << r.output);
}

inline json read_json(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "missing " << path);
  return json::parse(in);
}

// A run's final parameters (save_params=true), as written to params.f32.
inline std::vector<float> params_of(const std::string& run) {
  std::ifstream in(scratch().file(run) + "/params.f32", std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "missing params of " << run);
  std::vector<float> p;
  float v;
  while (in.read(reinterpret_cast<char*>(&v), sizeof v)) p.push_back(v);
  return p;
}

inline json summary_of(const std::string& run) { return read_json(scratch().file(run) + "/summary.json"); }

// The "iteration" lines of a run's trace.jsonl, in order.
inline std::vector<json> iterations(const std::string& run) {
  const std::string path = scratch().file(run) + "/trace.jsonl";
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "missing " << path);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json j = json::parse(line);
    if (j.value("event", "") == "iteration") out.push_back(std::move(j));
  }
  return out;
}

inline double median(std::vector<double> v) {
  BOOST_REQUIRE(!v.empty());
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tandem::testing
