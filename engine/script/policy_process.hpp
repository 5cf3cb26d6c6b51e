#pragma once
// One policy in a process of its own (the host's side; policy_worker.hpp is the
// other): policy code never shares an address space with training.
//
// The same calls as a PolicySandbox, each a request to the worker answered within
// the call's deadline, judged as the budget is (budget.hpp; DESIGN.md habit 13) by
// the CPU time the worker got, not by the wall clock alone:
//  - cpu_deadline_ms: the worker has used twice the call's budget of CPU, plus
//    100 ms, without answering: it is stuck where its budget's hook cannot reach (C
//    code, an error handler that loops);
//  - wall_deadline_ms: no answer in the budget's wall-clock backstop plus a grace of
//    seconds, however little CPU it used: the process is stopped or starved.
// The worker's CPU clock (clock_getcpuclockid) is read only once enough wall time has
// passed for it to have reached the CPU deadline, so an answer in time costs no extra
// system call. Past either deadline the worker is killed (SIGKILL) and the call fails
// as Hung, the message giving the CPU and the wall time; a worker that dies
// (a VM crash on crafted bytecode, a C stack overflow, the address-space limit)
// fails the call as Crash, with the signal or exit status. Either way the process
// is gone (alive() is false) and the host starts a fresh one when it wants the
// policy again. The destructor kills the worker: nothing of the policy's runs at
// the end (a finalizer that loops cannot hold the run open).
//
// Each decision's stats are written to a region of shared memory the worker maps
// read-only (kStatsRegionBytes, sparse), so a message carries only their count and
// the cost stays flat with the cluster's size; a request and its answer alternate,
// so the worker never reads while the host writes.
//
// The worker binary is tandem-policy-worker: $TANDEM_POLICY_WORKER, else beside the
// running executable, else the one this build made.
#include <sys/types.h>
#include <time.h>

#include <string>

#include "engine/script/policy_sandbox.hpp"
#include "engine/script/policy_wire.hpp"

namespace tandem {

class PolicyProcess {
public:
  // Starts a worker and loads the policy in it. Throws PolicyFailure (the worker
  // could not start, or the file does not load).
  PolicyProcess(const std::string& path, const PolicyLimits& limits);
  ~PolicyProcess();
  PolicyProcess(const PolicyProcess&) = delete;
  PolicyProcess& operator=(const PolicyProcess&) = delete;

  void init(const PolicyCluster& cluster);
  // After init(): the parameters it read (PolicySandbox::params_in_force).
  const std::string& params_in_force() const { return params_in_force_; }
  PolicyAnswer step(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                    const ClusterStats& cluster = ClusterStats{});
  void observe(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
               const ClusterStats& cluster = ClusterStats{});
  std::string save_literal();
  bool restore_literal(const std::string& literal);

  bool alive() const { return pid_ > 0; }
  // Kills the worker now (a call it failed may have left its state half-changed).
  void kill() { end(); }
  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  const std::string& confinement() const { return confinement_; }  // what the worker applied
  double last_call_ms() const { return last_call_ms_; }  // inside the worker (Lua time)
  double round_trip_ms() const { return round_trip_ms_; }  // the whole request
  double memory_mb() const { return memory_mb_; }
  pid_t pid() const { return pid_; }

  // A call with a budget of budget_ms of CPU (PolicyLimits: the decision's or the
  // setup's) is killed past either: the CPU time the worker used on it, or the wall
  // time it took.
  static double cpu_deadline_ms(double budget_ms);
  static double wall_deadline_ms(double budget_ms);

private:
  // Sends op with its payload and returns the reply's body, waiting up to the
  // deadlines of a call with a budget of budget_ms (plus extra_ms on the clock);
  // throws PolicyFailure.
  std::string request(PolicyOp op, const std::string& payload, const char* what, double budget_ms,
                      double extra_ms = 0.0);
  // The worker's CPU time so far, in ms (NaN when it cannot be read).
  double worker_cpu_ms() const;
  [[noreturn]] void died(const char* what);
  [[noreturn]] void hung(const char* what, double budget_ms, double limit_ms, double waited_ms, double cpu_ms,
                         bool on_cpu);
  void end();
  std::string stats_payload(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                            const ClusterStats& cluster);
  void open_stats_region();
  static int high_fd(int fd);

  std::string path_, name_, confinement_;
  std::string params_in_force_;
  PolicyLimits limits_;
  pid_t pid_ = -1;
  clockid_t cpu_clock_ = 0;  // the worker's CPU clock
  bool has_cpu_clock_ = false;
  int fd_ = -1;
  int stats_fd_ = -1;       // the shared stats region (the worker's fd 4)
  void* stats_ = nullptr;   // mapped here read-write, there read-only
  double last_call_ms_ = 0.0, round_trip_ms_ = 0.0, memory_mb_ = 0.0;
};

// The worker executable this process starts.
std::string policy_worker_path();

}  // namespace tandem
