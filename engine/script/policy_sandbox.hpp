#pragma once
// One balancing policy in a Lua state of its own (DESIGN.md habits 6 and 7), run in
// the policy worker process (policy_process.hpp), never beside training.
//
// A fresh state per policy is the "fresh environment": a new file never sees the old
// one's globals, and dropping a broken policy drops everything it made. The state is
// a CappedState (capped_state.hpp): the whitelisted environment, the JIT off, a
// memory cap and a budget of CPU time on every call (PolicyLimits). Infinite recursion is Lua's own "stack
// overflow" error. What those cannot stop (a C function that never returns, a VM
// crash) ends the worker process, and the host starts a fresh one.
//
// Not thread-safe: one thread at a time calls a sandbox.
#include <lua.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/script/capped_state.hpp"
#include "engine/train/plan.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

struct PolicyLimits {
  double budget_ms = 50.0;  // CPU ms of one call on a decision's path (step, observe, save)
  double memory_mb = 64.0;  // the whole state
  // Loading the file, init(cluster) and restore(state) run once per worker, off the
  // decisions' path, and read and compile the tandem library: their budget has
  // seconds more, so that a slow, loaded machine cannot fail a policy's start
  // (DESIGN.md habit 13), while a loop that never ends still stops.
  // policy.init_budget_ms replaces the sum where set (setup_ms > 0).
  static constexpr double kSetupExtraMs = 2000.0;
  double setup_ms = 0.0;
  double setup_budget_ms() const { return setup_ms > 0.0 ? setup_ms : budget_ms + kSetupExtraMs; }
};

// What init(cluster) receives.
struct PolicyCluster {
  int workers = 1;
  int64_t global_batch = 1;  // the experiment's B0 (what lr is given for)
  std::vector<int64_t> min_batch, max_batch;  // per worker
  std::vector<std::string> devices;           // per worker, a label for the device
  std::string params_json = "{}";             // cluster.params
  int history = 20;                           // iterations kept in stats.history
  std::string bsp_only;  // why the run trains with bsp only ("": any sync mode; plan.hpp bsp_only_reason)
  // Why a plan may not compute a worker's batch in micro-batches ("": it may); the
  // host's alone (never sent to the policy's worker).
  std::string micro_refused;
  int64_t accumulate = 1;  // the micro-batches of a plan that gives none (host only)
  // The global batches a plan may carry (policy.global_batch; 0: B0 alone, fixed).
  int64_t global_batch_min = 0, global_batch_max = 0;
  std::string lr_scaling = "linear";  // how lr follows B (config.hpp LrScaling)
  int64_t batch_min() const { return global_batch_min > 0 ? global_batch_min : global_batch; }
  int64_t batch_max() const { return global_batch_max > 0 ? global_batch_max : global_batch; }
};

// What one step(stats) returned.
struct PolicyAnswer {
  bool keep = true;  // nil: keep the plan
  std::vector<int64_t> local_batch;
  std::vector<int64_t> micro_batches;  // one per worker, or empty (none given: Plan::micro_batches)
  SyncPlan sync;     // from mode, groups, k, local_steps, staleness, sync_every (bsp when no mode)
  std::string reason;
  // The quantities behind the decision (metrics = {name = number}), for the trace:
  // at most kMaxPolicyMetrics, names of letters, digits and _, finite numbers.
  std::vector<std::pair<std::string, double>> metrics;
};
constexpr size_t kMaxPolicyMetrics = 16;

// Why a call failed (capped_state.hpp).
using PolicyFailure = ScriptFailure;

class PolicySandbox {
public:
  // Loads and runs the policy file; it must return a table with init and step
  // functions. Throws PolicyFailure (a file that is missing, does not parse, raises,
  // or returns something else).
  PolicySandbox(const std::string& path, const PolicyLimits& limits);
  ~PolicySandbox();
  PolicySandbox(const PolicySandbox&) = delete;
  PolicySandbox& operator=(const PolicySandbox&) = delete;

  void init(const PolicyCluster& cluster);
  // After init(): the parameters it read, one a line: "name" when policy.params
  // gives it, "name<TAB>default" when it took its default (the console's policy()).
  const std::string& params_in_force() const { return params_in_force_; }
  // step(stats) for iteration `iteration`'s stats (by rank), after appending them
  // to the history window. Throws PolicyFailure; a plan-shaped answer comes back
  // unvalidated against bounds (the host checks those).
  PolicyAnswer step(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                    const ClusterStats& cluster = ClusterStats{});
  // Appends the stats to the history window without calling step (a dry run's
  // new policy sees the same window as the old one did).
  void observe(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
               const ClusterStats& cluster = ClusterStats{});
  // For checkpoints: save() written as a Lua literal (plain data; numbers exact, to
  // 17 digits, infinities and NaN included), or "" when the policy has no save().
  // restore_literal() reads one back (in an empty environment: data, not code) and
  // hands it to restore(); false when the policy has no restore(). Both throw
  // PolicyFailure.
  std::string save_literal();
  bool restore_literal(const std::string& literal);

  const std::string& path() const { return path_; }
  std::string name() const;           // the file name without directory and .lua
  double last_call_ms() const { return last_call_ms_; }          // wall time (step: stats + step())
  double last_call_cpu_ms() const { return last_call_cpu_ms_; }  // CPU time, the budget's measure
  double memory_mb() const;           // what the state holds now
  lua_State* lua() const { return L_; }  // for the REPL (same thread rules)

private:
  // Under the budget of a decision's call, or setup's (setup_ > 0: the constructor,
  // init and restore_literal).
  void call(const char* function, int nargs, int nresults, const std::string& what);
  struct Setup;
  // table[name] (the policy table: policy[name]) pushed, looked up through call():
  // a policy's metatable may run code, which must fail as the policy's error.
  void push_field(int table, const char* name);
  void push_policy_field(const char* name);
  bool has_policy_function(const char* name);
  // The plan table's metrics (at stack index ans), sorted by name.
  template <typename Garbage>
  void read_metrics(int ans, const Garbage& garbage, std::vector<std::pair<std::string, double>>& metrics);
  // The plan table's sync-mode fields (at stack index ans) into sync.
  template <typename Garbage>
  void read_sync(int ans, const Garbage& garbage, SyncPlan& sync);
  // The list of one integer per worker at ans[key] into `out` (`item` names one in
  // messages, `items` several); false, out untouched, when the key is nil and not
  // `required`.
  template <typename Garbage>
  bool read_int_list(int ans, const char* key, const char* item, const char* items, bool required,
                     const Garbage& garbage, std::vector<int64_t>& out);

  std::string path_;
  std::string params_in_force_;
  PolicyLimits limits_;
  std::unique_ptr<CappedState> state_;
  lua_State* L_ = nullptr;  // state_'s
  int policy_ref_ = LUA_NOREF;   // the table the file returned
  int history_ref_ = LUA_NOREF;  // stats.history
  int history_len_ = 20;
  int workers_ = 0;
  std::vector<std::string> devices_;
  double last_call_ms_ = 0.0, last_call_cpu_ms_ = 0.0;
  int setup_ = 0;
};

}  // namespace tandem
