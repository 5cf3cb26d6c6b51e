#pragma once
// One policy in a process of its own (the host's side; policy_worker.hpp is the
// other): policy code never shares an address space with training.
//
// The same calls as a PolicySandbox, each a request to the worker answered within
// the call's deadline: the policy's budget plus a grace for the round trip. Past it
// the worker is killed (SIGKILL) and the call fails as Hung; a worker that dies
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

  // How long a call may take before the worker is killed.
  static double deadline_ms(double budget_ms);

private:
  // Sends op with its payload and returns the reply's body, waiting at most
  // deadline_ms(budget) + extra_ms; throws PolicyFailure.
  std::string request(PolicyOp op, const std::string& payload, const char* what, double extra_ms);
  [[noreturn]] void died(const char* what, bool timed_out, double waited_ms);
  void end();
  std::string stats_payload(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                            const ClusterStats& cluster);
  void open_stats_region();
  static int high_fd(int fd);

  std::string path_, name_, confinement_;
  std::string params_in_force_;
  PolicyLimits limits_;
  pid_t pid_ = -1;
  int fd_ = -1;
  int stats_fd_ = -1;       // the shared stats region (the worker's fd 4)
  void* stats_ = nullptr;   // mapped here read-write, there read-only
  double last_call_ms_ = 0.0, round_trip_ms_ = 0.0, memory_mb_ = 0.0;
};

// The worker executable this process starts.
std::string policy_worker_path();

}  // namespace tandem
