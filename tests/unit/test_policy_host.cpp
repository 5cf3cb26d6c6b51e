// The policy host's guard rails (engine/script/policy_sandbox.hpp, policy_host.hpp):
// every way a policy can go wrong (raises, loops with and without the JIT, pcalls
// around its interruption, recurses, allocates without bound, returns garbage,
// never returns from C, gets no CPU at all) ends in a failure that names it, and the
// training loop keeps the last good plan; hot swap by file change and by API, with
// state handed over, and a broken new file that leaves the old one running.
//
// A budget is tested by what it does (DESIGN.md habits 10 and 13): the call was cut
// off, the error names the budget, the worker was replaced, the plan was kept. Time
// is asserted only in the budget's own terms (the CPU time the call used), with
// margins of many times the budget; never the wall time, which a loaded machine
// stretches at will.
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/script/policy_host.hpp"
#include "engine/script/policy_process.hpp"
#include "engine/script/policy_sandbox.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_policy_host)  // ctest's unit.test_policy_host (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

constexpr double kBudgetMs = 30.0;

PolicyCluster cluster(int workers = 4, int64_t batch = 64) {
  PolicyCluster c;
  c.workers = workers;
  c.global_batch = batch;
  c.min_batch.assign(static_cast<size_t>(workers), 0);
  c.max_batch.assign(static_cast<size_t>(workers), batch);
  c.devices.assign(static_cast<size_t>(workers), "cpu");
  c.params_json = R"({"threshold": 0.25, "names": ["a", "b"]})";
  c.history = 5;
  return c;
}

std::vector<WorkerStats> stats(int workers = 4, int64_t batch = 16) {
  std::vector<WorkerStats> s(static_cast<size_t>(workers));
  for (int r = 0; r < workers; ++r) {
    s[static_cast<size_t>(r)].rank = r;
    s[static_cast<size_t>(r)].valid = 1;
    s[static_cast<size_t>(r)].local_batch = batch;
    s[static_cast<size_t>(r)].compute_ms = 10.0 * (r + 1);
  }
  return s;
}

// A policy whose step body is `body` (it sees `stats` and the module table P).
std::string policy(const std::string& step_body, const std::string& extra = "") {
  // init reads the parameters cluster() gives (a policy must read every one it is given).
  return "local P = {}\n" + extra +
         "function P.init(cluster) P.cluster = cluster; P.params = { cluster.params.threshold, cluster.params.names } "
         "end\nfunction P.step(stats)\n" +
         step_body + "\nend\nreturn P\n";
}

// budget_ms: the recursion and memory cases get a long one, so that the budget cannot
// come before "stack overflow" or "out of memory". cpu_ms: the CPU time of the call
// that failed; message: its error.
PolicyFailure::Kind step_failure(const std::string& file, double* cpu_ms = nullptr, double budget_ms = kBudgetMs,
                                 std::string* message = nullptr) {
  PolicySandbox box(file, {budget_ms, 32.0});
  box.init(cluster());
  try {
    box.step(0, 64, stats());
  } catch (const PolicyFailure& f) {
    if (cpu_ms) *cpu_ms = box.last_call_cpu_ms();
    if (message) *message = f.what();
    BOOST_TEST_MESSAGE(f.what());
    // The sandbox is still usable after an interrupted call.
    return f.kind();
  }
  BOOST_FAIL("step() should have failed");
  return PolicyFailure::Error;
}

PolicyConfig host_config(const std::string& file, int max_failures = 3) {
  PolicyConfig c;
  c.file = file;
  c.budget_ms = kBudgetMs;
  c.memory_mb = 32.0;
  c.max_failures = max_failures;
  c.history = 5;
  return c;
}

// submit + collect, as the training loop does.
std::optional<Plan> decide(PolicyHost& host, int64_t t, PolicyReport& report,
                           std::vector<int64_t> in_force = {16, 16, 16, 16}) {
  std::vector<WorkerStats> s = stats();  // measured under the plan in force
  for (size_t r = 0; r < s.size(); ++r) s[r].local_batch = in_force[r];
  host.submit(t, s);
  // Training takes a late answer at a later boundary; these tests want each one, so
  // they collect until it is there (the worker's deadline bounds the wait).
  const double give_up = now_ms() + 60000.0;
  std::optional<Plan> plan;
  do {
    plan = host.collect(report);
    if (report.event == "late" || report.event == "idle") std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while ((report.event == "late" || report.event == "idle") && now_ms() < give_up);
  return plan;
}

}  // namespace

BOOST_AUTO_TEST_CASE(stats_cluster_and_plan_reach_the_policy) {
  TempDir dir("policy-stats");
  const std::string f = dir.write("p.lua", policy(R"(
    assert(P.cluster.workers == 4 and P.cluster.global_batch == 64 and P.cluster.history == 5)
    assert(P.cluster.params.threshold == 0.25 and P.cluster.params.names[2] == 'b')
    assert(P.cluster.max_batch[4] == 64 and P.cluster.devices[1] == 'cpu')
    local w = stats.workers
    assert(#w == 4 and w[2].rank == 1 and w[2].compute_ms == 20 and w[4].local_batch == 16)
    assert(w[3].device == 'cpu')
    assert(stats.history[#stats.history].workers == w)
    assert(#stats.history == math.min(stats.iteration + 1, 5))
    return { local_batch = {40, 8, 8, 8}, reason = 'rank 0 is fastest' })"));
  PolicySandbox box(f, {kBudgetMs, 32.0});
  box.init(cluster());
  for (int t = 0; t < 8; ++t) {
    const PolicyAnswer a = box.step(t, 64, stats());
    BOOST_TEST(!a.keep);
    BOOST_TEST(a.local_batch == (std::vector<int64_t>{40, 8, 8, 8}), boost::test_tools::per_element());
    BOOST_TEST(a.reason == "rank 0 is fastest");
  }
}

// The whitelist (scripts/tandem/whitelist.lua): what a policy may not reach is not
// there, and what it may is.
BOOST_AUTO_TEST_CASE(the_environment_is_a_whitelist) {
  TempDir dir("policy-whitelist");
  const std::string f = dir.write("p.lua", policy(R"(
    local gone = { 'io', 'package', 'jit', 'ffi', 'dofile', 'loadfile', 'setfenv', 'getfenv', 'newproxy',
                   'module', 'gcinfo' }
    for _, name in ipairs(gone) do assert(_G[name] == nil, name .. ' is reachable') end
    assert(os.execute == nil and os.exit == nil and os.getenv == nil and os.remove == nil, 'os leaks')
    assert(os.clock and os.time, 'os.clock and os.time are kept')
    assert(debug.sethook == nil and debug.getregistry == nil and debug.traceback, 'debug leaks')
    assert(string.dump == nil and ('').dump == nil, 'string.dump leaks')
    assert(not pcall(require, 'ffi') and not pcall(require, 'jit.util') and not pcall(require, 'io'), 'require leaks')
    assert(require('tandem.minmax') and require('lpsolve'), 'the tandem library and lpsolve are kept')
    assert(load('return 1')() == 1 and loadstring('return 2')() == 2, 'text chunks load')
    local bytecode = '\27LJ\2\10\22\0\0\1\0\1\0\2\39\0\255\127\76\0\2\0\11abcdef\0'
    assert(load(bytecode) == nil and loadstring(bytecode) == nil, 'binary chunks load')
    assert(collectgarbage('count') > 0 and not pcall(collectgarbage, 'collect'), 'collectgarbage leaks')
    assert(jit == nil, 'the JIT is reachable')
    return { local_batch = {16, 16, 16, 16}, reason = 'all checks passed' })"));
  PolicySandbox box(f, {2000.0, 32.0});
  box.init(cluster());
  const PolicyAnswer a = box.step(0, 64, stats());
  BOOST_TEST(a.reason == "all checks passed");
}

BOOST_AUTO_TEST_CASE(an_error_comes_back_with_its_traceback) {
  TempDir dir("policy-error");
  const std::string f = dir.write("p.lua", policy("local function deep() error('bad model fit') end\ndeep()"));
  PolicySandbox box(f, {kBudgetMs, 32.0});
  box.init(cluster());
  try {
    box.step(0, 64, stats());
    BOOST_FAIL("should raise");
  } catch (const PolicyFailure& e) {
    const std::string msg = e.what();
    BOOST_TEST(e.kind() == PolicyFailure::Error);
    CHECK_CONTAINS(msg, "p.lua:4: bad model fit");
    CHECK_CONTAINS(msg, "stack traceback");
    CHECK_CONTAINS(msg, "in function 'deep'");
  }
}

BOOST_AUTO_TEST_CASE(runaway_loops_are_interrupted_at_the_budget) {
  TempDir dir("policy-loops");
  const struct {
    const char* name;
    const char* body;
  } loops[] = {
      {"while", "while true do end"},
      // A numeric loop over arithmetic: what LuaJIT would compile into a trace that
      // never looks at hooks, were the JIT on.
      {"jit-shaped", "local x = 0\nfor i = 1, math.huge do x = x + i * 0.5 end\nreturn x"},
      {"pcall-swallowing", "while true do pcall(function() while true do end end) end"},
      {"string work", "local s = ''\nwhile true do s = ('x'):rep(10) .. s:sub(1, 100) end"},
  };
  for (const auto& loop : loops) {
    BOOST_TEST_CONTEXT(loop.name) {
      double cpu = 0.0;
      std::string message;
      BOOST_TEST(step_failure(dir.write(std::string(loop.name) + ".lua", policy(loop.body)), &cpu, kBudgetMs,
                              &message) == PolicyFailure::Timeout);
      CHECK_CONTAINS(message, "ran past its time budget of 30.0 ms of CPU (policy.budget_ms): ");
      CHECK_CONTAINS(message, " ms of CPU in ");
      // Cut off once it had used its budget of CPU time (however long that took on
      // the clock), and soon after: the hook looks every 256 instructions.
      BOOST_TEST(cpu >= kBudgetMs);
      BOOST_TEST(cpu < 10.0 * kBudgetMs);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_solve_asked_for_no_time_limit_still_stops_at_the_budget) {
  // Subset sum with even weights and an odd target: infeasible in integers, but its
  // relaxation is not, so branch and bound would search for a very long time.
  TempDir dir("policy-solve");
  const std::string f = dir.write("p.lua", policy(R"(
    local lp = require 'lpsolve'
    local m = lp.model()
    local cols, coefs, seed = {}, {}, 12345
    for i = 1, 60 do
      seed = (seed * 1103515245 + 12345) % 2147483648
      cols[i] = m:var { int = true, hi = 1 }
      coefs[i] = 2 * (500000 + seed % 1000000)
    end
    m:constraint(cols, coefs, '==', 20000001)
    m:objective(cols, coefs, 'max')
    local r = m:solve { time_limit_s = math.huge }
    assert(r.status == 'timeout' or r.status == 'suboptimal', 'status ' .. r.status)
    return nil)"));
  // The solve comes back at the budget, as a status the policy can act on.
  PolicySandbox box(f, {kBudgetMs, 32.0});
  box.init(cluster());
  try {
    BOOST_TEST(box.step(0, 64, stats()).keep);
  } catch (const PolicyFailure& e) {
    BOOST_TEST(e.kind() == PolicyFailure::Timeout, e.what());  // or the hook got there first
  }
  // Stopped by the budget (CPU time, as the budget counts it), not by math.huge.
  BOOST_TEST(box.last_call_cpu_ms() >= kBudgetMs);
  BOOST_TEST(box.last_call_cpu_ms() < 10.0 * kBudgetMs);
}

BOOST_AUTO_TEST_CASE(endless_recursion_and_allocation_fail_cleanly) {
  TempDir dir("policy-limits");
  BOOST_TEST(step_failure(dir.write("r.lua", policy("local function f(n) return 1 + f(n + 1) end\nreturn f(1)")), nullptr,
                          5000.0) == PolicyFailure::Error);
  BOOST_TEST(step_failure(dir.write("m.lua", policy("local t = {}\nwhile true do t[#t + 1] = ('x'):rep(100000) .. #t end")), nullptr, 5000.0) ==
             PolicyFailure::Memory);
  BOOST_TEST(step_failure(dir.write("big.lua", policy("return ('x'):rep(2 ^ 30)")), nullptr, 5000.0) == PolicyFailure::Memory);
}

BOOST_AUTO_TEST_CASE(a_memory_cap_too_small_for_the_libraries_is_an_error_not_a_crash) {
  TempDir dir("policy-tiny");
  const std::string f = dir.write("p.lua", policy("return nil"));
  try {
    PolicySandbox box(f, {kBudgetMs, 0.02});
    BOOST_FAIL("a 20 KB state should not hold the libraries");
  } catch (const PolicyFailure& e) {
    BOOST_TEST(e.kind() == PolicyFailure::Memory);
    CHECK_CONTAINS(std::string(e.what()), "policy.memory_mb");
  }
}

BOOST_AUTO_TEST_CASE(garbage_answers_are_rejected_with_the_reason) {
  TempDir dir("policy-garbage");
  const struct {
    const char* body;
    const char* expect;
  } cases[] = {
      {"return 'faster'", "returned faster, not a plan table"},
      {"return { 16, 16, 16, 16 }", "without a local_batch list"},
      {"return { local_batch = {32, 32} }", "2 local batches for 4 workers"},
      {"return { local_batch = {16, 16, 16, 'x'} }", "worker 3 the batch x, not a number"},
      {"return { local_batch = {16, 16, 16, 16}, micro_batches = {1, 'x', 1, 1} }",
       "worker 1 the micro-batch count x, not a number"},
      {"return { local_batch = {16, 16, 16, 16}, micro_batches = {1, 2} }", "2 micro-batch counts for 4 workers"},
      {"return { local_batch = {16, 16, 16, 16}, micro_batches = 3 }", "without a micro_batches list"},
      {"return { local_batch = {16.5, 15.5, 16, 16} }", "not a finite integer"},
      {"return { local_batch = {0/0, 16, 16, 16} }", "not a finite integer"},
      {"return { local_batch = {math.huge, 16, 16, 16} }", "not a finite integer"},
  };
  int i = 0;
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.body) {
      PolicySandbox box(dir.write("g" + std::to_string(i++) + ".lua", policy(c.body)), {kBudgetMs, 32.0});
      box.init(cluster());
      try {
        box.step(0, 64, stats());
        BOOST_FAIL("should be rejected");
      } catch (const PolicyFailure& f) {
        BOOST_TEST(f.kind() == PolicyFailure::Garbage);
        CHECK_CONTAINS(std::string(f.what()), c.expect);
      }
    }
  }
  // Plans of the right shape but outside the bounds: the host's check.
  const PolicyCluster cl = cluster();
  CHECK_CONTAINS(plan_problem({64, 0, 0, 1}, cl), "sum to 65, not the global batch 64");
  CHECK_CONTAINS(plan_problem({-1, 33, 16, 16}, cl), "worker 0 gets -1, outside its bounds [0, 64]");
  BOOST_TEST(plan_problem({64, 0, 0, 0}, cl).empty());
  // A worker's max_batch bounds its micro-batch (issue 37): 64 samples in 4 of 16 fit
  // a cap of 16; in 3 (up to 22) they do not.
  PolicyCluster capped = cl;
  capped.max_batch = {16, 16, 16, 16};
  CHECK_CONTAINS(plan_problem({64, 0, 0, 0}, capped), "worker 0 gets 64, outside its bounds [0, 16]");
  BOOST_TEST(plan_problem({64, 0, 0, 0}, capped, {4, 1, 1, 1}).empty());
  CHECK_CONTAINS(plan_problem({64, 0, 0, 0}, capped, {3, 1, 1, 1}),
                 "worker 0 gets 64 in 3 micro-batches of up to 22, outside its bounds [0, 16]");
  CHECK_CONTAINS(plan_problem({64, 0, 0, 0}, capped, {4, 1, 1}), "3 micro-batch counts for 4 workers");
  CHECK_CONTAINS(plan_problem({64, 0, 0, 0}, capped, {4, 0, 1, 1}), "worker 1 gets 0 micro-batches");
}

BOOST_AUTO_TEST_CASE(a_failing_policy_keeps_the_last_good_plan_then_is_dropped) {
  TempDir dir("policy-fallback");
  // Good for the first two calls, then always failing in a different way.
  const std::string f = dir.write("p.lua", policy(R"(
    P.calls = P.calls + 1
    if P.calls <= 2 then return { local_batch = {40, 8, 8, 8}, reason = 'good' } end
    if P.calls == 3 then error('oops') end
    if P.calls == 4 then return { local_batch = {64, 64, 0, 0} } end
    while true do end)", "P.calls = 0\n"));
  PolicyHost host(host_config(f, 3), cluster());
  PolicyReport r;
  BOOST_TEST(!host.collect(r).has_value());  // nothing asked yet
  BOOST_TEST(r.event == "idle");
  auto p = decide(host, 0, r);
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(r.event == "plan");
  BOOST_TEST(r.reason == "good");
  BOOST_TEST(!decide(host, 1, r, {40, 8, 8, 8}).has_value());  // the same plan: keep
  BOOST_TEST(r.event == "keep");
  BOOST_TEST(!decide(host, 2, r, {40, 8, 8, 8}).has_value());
  BOOST_TEST(r.event == "error");
  CHECK_CONTAINS(r.reason, "oops");
  BOOST_TEST(!decide(host, 3, r, {40, 8, 8, 8}).has_value());
  BOOST_TEST(r.event == "rejected");
  CHECK_CONTAINS(r.reason, "sum to 128");
  BOOST_TEST(!decide(host, 4, r, {40, 8, 8, 8}).has_value());
  BOOST_TEST(r.event == "disabled");  // the third failure in a row: the budget cut the loop off
  BOOST_TEST(r.failed);
  CHECK_CONTAINS(r.reason, "ran past its time budget of 30.0 ms of CPU");
  BOOST_TEST(!decide(host, 5, r, {40, 8, 8, 8}).has_value());
  BOOST_TEST(r.event == "disabled");
  BOOST_TEST(r.cost_ms == 0.0);  // not called any more
  const PolicyHost::Totals totals = host.totals();
  BOOST_TEST(totals.failures == 3);
  BOOST_TEST(totals.rejected == 1);
  BOOST_TEST(totals.disabled);
}

// What the budget's hook cannot stop (an error handler that loops: the hook's error
// raised inside it calls it again) and what no Lua code survives (a C stack overflow
// through a gsub callback) end the worker process: the call fails with its cause
// within its deadline, and the next decision runs in a fresh worker.
BOOST_AUTO_TEST_CASE(a_hung_or_crashed_worker_is_replaced) {
  TempDir dir("policy-hung");
  const std::string f = dir.write("p.lua", policy(R"(
    if stats.iteration == 0 then xpcall(function() while true do end end, function() while true do end end) end
    if stats.iteration == 1 then local function g() return (string.gsub('x', 'x', g)) end g() end
    return { local_batch = {40, 8, 8, 8} })"));
  PolicyConfig cfg = host_config(f);
  // Long enough that a loaded machine cannot turn the crash (a C stack overflow,
  // milliseconds away) into a time-out; the hang is killed at its deadline.
  cfg.budget_ms = 1000.0;
  PolicyHost host(cfg, cluster());
  PolicyReport r;
  // Training's side: collect() waits the budget (and the round trip's grace), then
  // goes on with the plan in force ("late": the answer did not come, and it cannot
  // have, since the call never returns); the worker is killed meanwhile, once it
  // has spent its CPU deadline (2 x budget + 100 ms of CPU) without answering.
  std::vector<WorkerStats> s = stats();
  host.submit(0, s);
  BOOST_TEST(!host.collect(r).has_value());
  BOOST_TEST(r.event == "late");
  BOOST_TEST(r.wait_ms >= cfg.budget_ms);
  CHECK_CONTAINS(r.reason, "training goes on with the plan in force");
  const double give_up = now_ms() + 300000.0;  // a hang of the test, not a verdict
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    host.collect(r);
  } while (r.event != "hung" && now_ms() < give_up);
  BOOST_TEST(r.event == "hung");
  CHECK_CONTAINS(r.reason, "did not finish step(stats) within its deadline");
  CHECK_CONTAINS(r.reason, "was killed");
  // The verdict came from the CPU time it burnt (unless this machine gave it under a
  // tenth of a core for 17 s, when the wall-clock backstop decides).
  BOOST_TEST((r.reason.find("ms of CPU without answering (the deadline: 2100 ms of CPU") != std::string::npos ||
              r.reason.find("the backstop") != std::string::npos),
             r.reason);
  BOOST_TEST(!decide(host, 1, r).has_value());
  BOOST_TEST(r.event == "crash");
  CHECK_CONTAINS(r.reason, "killed by signal");
  const std::optional<Plan> plan = decide(host, 2, r);
  BOOST_REQUIRE(plan.has_value());
  BOOST_TEST(plan->local_batch == (std::vector<int64_t>{40, 8, 8, 8}), boost::test_tools::per_element());
  BOOST_TEST(host.totals().failures == 2);
  BOOST_TEST(!host.totals().disabled);
}

// A worker that gets no CPU at all (stopped here with SIGSTOP, as a debugger or a
// starved machine might leave it) uses none of its budget: the wall-clock backstop
// (10 x budget + 5 s, plus 2 s for the round trip) still declares it hung, and the
// failure says how little CPU it got.
BOOST_AUTO_TEST_CASE(a_worker_that_gets_no_cpu_is_killed_at_the_wall_clock_backstop) {
  TempDir dir("policy-stopped");
  const std::string f = dir.write("p.lua", policy("return nil"));
  PolicyProcess worker(f, {kBudgetMs, 32.0});
  worker.init(cluster());
  BOOST_TEST(worker.step(0, 64, stats()).keep);
  BOOST_REQUIRE(::kill(worker.pid(), SIGSTOP) == 0);
  try {
    worker.step(1, 64, stats());
    BOOST_FAIL("a stopped worker answered");
  } catch (const PolicyFailure& e) {
    const std::string msg = e.what();
    BOOST_TEST(e.kind() == PolicyFailure::Hung);
    CHECK_CONTAINS(msg, "did not finish step(stats) within its deadline: no answer in ");
    CHECK_CONTAINS(msg, "(the backstop: 7300 ms, for a budget of 30 ms of CPU), in which it got only 0 ms of CPU");
    CHECK_CONTAINS(msg, "its worker process was killed");
  }
  BOOST_TEST(!worker.alive());
}

// Loading a policy, init(cluster) and restore(state) run once per worker, off the
// decisions' path: they get 2 s of CPU more than a decision, so a slow machine
// compiling the library cannot fail a policy's start; a loop there still stops.
BOOST_AUTO_TEST_CASE(loading_and_init_have_seconds_more_than_a_decision) {
  TempDir dir("policy-setup");
  // Ten budgets of CPU when loading, in init and in restore; the same in step() is cut off.
  const std::string slow = dir.write("slow.lua", R"(
    local function burn(ms) local t = os.clock() + ms / 1000; while os.clock() < t do end end
    burn(300)
    local P = {}
    function P.init(cluster) P.params = { cluster.params.threshold, cluster.params.names }; burn(300) end
    function P.step(stats) burn(300) end
    function P.save() return { n = 1 } end
    function P.restore(s) burn(300) end
    return P)");
  PolicySandbox box(slow, {kBudgetMs, 32.0});
  box.init(cluster());
  BOOST_TEST(box.restore_literal("{ n = 1 }"));
  std::string message;
  BOOST_TEST(step_failure(slow, nullptr, kBudgetMs, &message) == PolicyFailure::Timeout);
  CHECK_CONTAINS(message, "time budget of 30.0 ms of CPU (policy.budget_ms)");
  const std::string loops = dir.write("loops.lua", R"(
    local P = {}
    function P.init(cluster) P.params = { cluster.params.threshold, cluster.params.names }; while true do end end
    function P.step(stats) return nil end
    return P)");
  // init() under `limits` must time out, saying which budget stopped it; returns the
  // call's CPU.
  auto init_times_out = [&](const PolicyLimits& limits, const std::string& budget_text) {
    PolicySandbox looping(loops, limits);
    try {
      looping.init(cluster());
      BOOST_FAIL("a loop in init() was not stopped");
    } catch (const PolicyFailure& e) {
      BOOST_TEST(e.kind() == PolicyFailure::Timeout);
      CHECK_CONTAINS(std::string(e.what()), budget_text);
    }
    return looping.last_call_cpu_ms();
  };
  const PolicyLimits limits{kBudgetMs, 32.0};
  BOOST_TEST(init_times_out(limits, "time budget of 2030.0 ms of CPU (policy.budget_ms + 2000 ms, for loading, "
                                    "init(cluster) and restore(state))") >= limits.setup_budget_ms());
  // policy.init_budget_ms replaces the sum: the same loop stops at its own budget.
  const double bounded = init_times_out({kBudgetMs, 32.0, 120.0}, "time budget of 120.0 ms of CPU "
                                        "(policy.init_budget_ms, for loading, init(cluster) and restore(state))");
  BOOST_TEST(bounded >= 120.0);
  BOOST_TEST(bounded < limits.setup_budget_ms());
}

// The stats reach the worker through the shared region (every test here), and past
// its size (65536 workers) inline in the message: the same answer either way.
BOOST_AUTO_TEST_CASE(stats_past_the_shared_region_travel_inline) {
  TempDir dir("policy-inline");
  const std::string f = dir.write("p.lua", R"(local P = {}
function P.init(c) end
function P.step(stats)
  local w = stats.workers
  error('seen ' .. #w .. ' workers, the last of rank ' .. w[#w].rank .. ' at ' .. w[#w].compute_ms .. ' ms', 0)
end
return P
)");
  for (const int workers : {4, 70000}) {
    PolicyCluster c = cluster(workers, 64LL * workers);
    c.params_json = "{}";
    PolicyProcess worker(f, {20000.0, 1024.0});
    worker.init(c);
    std::vector<WorkerStats> s = stats(workers);
    // What the policy saw comes back as its error's message.
    try {
      worker.step(0, c.global_batch, s);
      BOOST_FAIL("step() should have raised");
    } catch (const PolicyFailure& e) {
      CHECK_CONTAINS(std::string(e.what()), "seen " + std::to_string(workers) + " workers, the last of rank " +
                                                std::to_string(workers - 1) + " at " + std::to_string(10 * workers) +
                                                " ms");
    }
  }
}

BOOST_AUTO_TEST_CASE(hot_swap_by_file_change_hands_over_state) {
  TempDir dir("policy-swap");
  const std::string state = R"(
    function P.save() return { seen = P.seen, note = 'from v1' } end
    function P.restore(s) P.seen = s.seen; P.note = s.note end
  )";
  const std::string f = dir.write("p.lua", policy(
      "P.seen = (P.seen or 0) + 1\nreturn { local_batch = {16, 16, 16, 16}, reason = 'v1' }", state));
  PolicyHost host(host_config(f), cluster());
  PolicyReport r;
  decide(host, 0, r, {10, 10, 22, 22});
  BOOST_TEST(r.reason == "v1");
  decide(host, 1, r);
  // A new version: it must see the count the old one kept, and the history window.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a distinct mtime
  dir.write("p.lua", policy(R"(
    P.seen = P.seen + 1
    assert(P.seen ~= 3 or #stats.history == 3, 'history ' .. #stats.history)
    return { local_batch = {61, 1, 1, 1}, reason = 'v2 after ' .. P.seen .. ' ' .. P.note })", state));
  auto p = decide(host, 2, r);
  BOOST_TEST(r.event == "swapped");
  BOOST_TEST(r.reason == "v2 after 3 from v1");
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(p->local_batch[0] == 61);

  // A broken version: the running one stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.write("p.lua", "local P = {}\nfunction P.step(stats) return nil end\nreturn P   -- no init\n");
  decide(host, 3, r);
  BOOST_TEST(r.event == "swap_failed");
  CHECK_CONTAINS(r.reason, "must return a table with init(cluster) and step(stats)");
  p = decide(host, 4, r);
  BOOST_TEST(r.event == "plan");  // still v2
  CHECK_CONTAINS(r.reason, "v2 after 5");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.write("p.lua", policy("return { local_batch = {64, 0, 0, 0}, reason = 'syntax' } end end"));
  decide(host, 5, r);
  BOOST_TEST(r.event == "swap_failed");
  CHECK_CONTAINS(r.reason, "p.lua");
  const PolicyHost::Totals t = host.totals();
  BOOST_TEST(t.swaps == 1);
  BOOST_TEST(t.swap_failures == 2);
}

BOOST_AUTO_TEST_CASE(hot_swap_through_the_api_and_a_failing_dry_run) {
  TempDir dir("policy-api-swap");
  const std::string a = dir.write("a.lua", policy("return nil"));
  const std::string b = dir.write("b.lua", policy("return { local_batch = {1, 1, 1, 61}, reason = 'b' }"));
  const std::string bad = dir.write("bad.lua", policy("return { local_batch = {1, 1, 1, 1} }"));
  PolicyConfig cfg = host_config(a);
  cfg.watch = false;
  PolicyHost host(cfg, cluster());
  PolicyReport r;
  decide(host, 0, r);
  BOOST_TEST(r.event == "keep");
  auto failed = host.swap(bad);
  decide(host, 1, r);
  const SwapResult fr = failed.get();
  BOOST_TEST(!fr.ok);
  CHECK_CONTAINS(fr.message, "the dry run returned an invalid plan");
  BOOST_TEST(host.policy_name() == "a");
  auto ok = host.swap(b);
  auto p = decide(host, 2, r);
  BOOST_TEST(ok.get().ok);
  BOOST_TEST(host.policy_name() == "b");
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(p->local_batch[3] == 61);
}

BOOST_AUTO_TEST_CASE(a_broken_policy_at_start_is_an_error_that_says_why) {
  TempDir dir("policy-start");
  const std::string f = dir.write("p.lua", policy("return nil").replace(0, 0, "local x = = 1\n"));
  const std::string msg = error_of([&] { PolicyHost host(host_config(f), cluster()); });
  CHECK_CONTAINS(msg, "failed to start");
  CHECK_CONTAINS(msg, "p.lua:1");
  const std::string init_err = dir.write("i.lua", "return { init = function(c) error('needs params.speeds') end, "
                                                  "step = function() end }");
  CHECK_CONTAINS(error_of([&] { PolicyHost host(host_config(init_err), cluster()); }), "needs params.speeds");
}

// The stats history itself outgrowing the cap (thousands of workers, a small cap):
// every call fails as out of memory, none takes the process down (the host's own
// pushes around a call are outside the cap; an unprotected refusal would panic).
BOOST_AUTO_TEST_CASE(stats_outgrowing_the_cap_fail_calls_not_the_process) {
  TempDir dir("stats-cap");
  const std::string file = dir.write("keep.lua", policy("return nil"));
  PolicySandbox box(file, {1000.0, 2.0});
  PolicyCluster c = cluster(4096, 8192);
  c.history = 20;
  box.init(c);
  int failed = 0;
  for (int t = 0; t < 30; ++t) {
    try {
      box.step(t, 8192, stats(4096, 2));
    } catch (const PolicyFailure& f) {
      BOOST_TEST(f.kind() == PolicyFailure::Memory, f.what());
      ++failed;
    }
  }
  BOOST_TEST(failed > 0, "2 MB cannot hold 20 iterations of 4096 workers' stats");
}

// A parameter init() never reads is a typo until proven otherwise: refused, naming it
// and the parameters the policy does read.
BOOST_AUTO_TEST_CASE(a_parameter_the_policy_never_reads_is_refused) {
  TempDir dir("policy-params");
  const std::string f = dir.write("p.lua", "local P = {}\nfunction P.init(c) P.t = c.params.threshold end\n"
                                           "function P.step(s) return nil end\nreturn P\n");
  PolicySandbox box(f, {kBudgetMs, 32.0});
  try {
    box.init(cluster());
    BOOST_FAIL("an unread parameter was accepted");
  } catch (const PolicyFailure& e) {
    const std::string msg = e.what();
    CHECK_CONTAINS(msg, "no parameter names");
    CHECK_CONTAINS(msg, "its parameters are threshold");
  }
  PolicyCluster c = cluster();
  c.params_json = R"({"threshold": 0.5})";
  PolicySandbox ok(f, {kBudgetMs, 32.0});
  ok.init(c);
}

BOOST_AUTO_TEST_SUITE_END()  // test_policy_host
