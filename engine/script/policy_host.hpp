#pragma once
// Rank 0's Lua policy: a thread beside training (plan_policy.hpp has the timing
// contract) that talks to the policy's worker process (policy_process.hpp; the
// policy's code never runs in training's address space). The host keeps a bad policy
// from hurting the run:
//  - every answer is validated (one integer per worker, each within [min, max] of
//    that worker, summing to the global batch); an invalid plan is rejected with
//    its reason and the plan in force stays;
//  - a call that raises, runs past its time budget (CPU time) or its memory cap
//    counts as a failure; so does a worker that crashes or does not answer by its
//    deadline (judged by the CPU time it got, with a wall-clock backstop of seconds:
//    policy_process.hpp; it is killed). A call still running when training stops
//    waiting for it is late, not failed. A dead worker is replaced by a fresh one (loaded, initialised, given
//    the stats history) at the next decision. After policy.max_failures in a row the
//    policy is dropped, the last good plan stays, and the log says so;
//  - hot swap: when the policy file changes (policy.watch) or swap() is called, the
//    new file is loaded into a fresh worker, init(cluster), handed the old policy's
//    save() through restore(), and dry-run on the history window and the latest
//    stats; only if all of that succeeds and the dry run's answer is valid does it
//    replace the old policy (its answer is that iteration's decision). A broken new
//    file leaves the old policy running and says why.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/script/policy_process.hpp"
#include "engine/train/config.hpp"
#include "engine/train/plan_policy.hpp"

namespace tandem {

// How a hot swap went.
struct SwapResult {
  bool ok = false;
  std::string policy;   // the file that was tried
  std::string message;  // "swapped in ..." or what failed, with the Lua traceback
};

// The cluster a policy sees at init, from the experiment: bounds per worker and a
// device label per worker.
// measure_memory (a real run, not tandem sim): where the experiment gives no caps
// (policy.max_batch, emulation memory), each worker's cap is what its device's memory
// holds at once (measured_micro_caps), when that is below the global batch.
PolicyCluster policy_cluster(const ExperimentConfig& cfg, int workers, bool measure_memory = false);

// Loads the experiment's policy and runs init() once, on this thread: the launcher
// calls it before starting ranks so a broken policy fails the run at once, with
// its traceback. Throws tandem::Error.
void check_policy(const ExperimentConfig& cfg, int workers);

// Empty when valid, else why not: the local batches against the cluster's bounds,
// and (for a whole answer) the sync mode's settings.
// micro_batches (empty: one each): a worker's max_batch bounds its micro-batch,
// ceil(b / k), not its local batch b (issue 37).
std::string plan_problem(const std::vector<int64_t>& local_batch, const PolicyCluster& cluster,
                         const std::vector<int64_t>& micro_batches = {});
std::string plan_problem(const PolicyAnswer& answer, const PolicyCluster& cluster);

class PolicyHost : public PlanPolicy {
public:
  // Loads and initialises the policy (on the calling thread; throws tandem::Error
  // for a broken policy), then starts the policy thread.
  PolicyHost(const PolicyConfig& cfg, PolicyCluster cluster);
  ~PolicyHost() override;

  void submit(int64_t iteration, const std::vector<WorkerStats>& stats,
              const ClusterStats& cluster = ClusterStats{}) override;
  std::optional<Plan> collect(PolicyReport& report) override;

  // Swap in the policy at `path` (the REPL's entry): done at the next submit, on
  // its stats; the future tells how it went.
  // params_json: the new policy's cluster.params (a JSON object), or empty to keep
  // the current ones (the REPL's set() swaps the same file with changed params).
  std::future<SwapResult> swap(const std::string& path, const std::string& params_json = "");
  std::string policy_name() const;
  std::string name() const override { return policy_name(); }
  std::string saved_state() override;
  bool restore_state(const std::string& state) override;
  std::string saved_window() override;
  bool restore_window(const std::string& bytes, const SyncPlan& in_force) override;
  std::string policy_file() const;
  // Waits for every answer however long it takes (up to the worker's deadline), for
  // the simulator, whose decisions must not depend on how loaded the machine is.
  // Training waits at most the budget (collect()).
  void wait_for_answers() { wait_for_answers_ = true; }
  // The round trip to the worker on top of the budget that collect() waits.
  static constexpr double kCollectGraceMs = 10.0;
  std::string params_json() const;  // the policy's cluster.params, as JSON
  // The parameters the policy's init() read, one a line: "name" when given in
  // params_json, "name<TAB>default" when it took its default (PolicyProcess's).
  std::string params_in_force() const;

  // What has happened to the policies so far (the run's summary counts the
  // trace's decisions instead; these are for a caller holding the host).
  struct Totals {
    int64_t failures = 0, rejected = 0, swaps = 0, swap_failures = 0;
    bool disabled = false;  // not called any more (too many failures, or hung)
  };
  Totals totals() const;

private:
  struct Job {
    int64_t iteration = -1;
    std::vector<WorkerStats> stats;
    std::vector<int64_t> in_force;  // the local batches the stats were measured under
    ClusterStats cluster;
  };
  struct Decision {
    std::optional<Plan> plan;
    PolicyReport report;
  };

  void run();
  Decision decide(const Job& job);
  bool ensure_worker(Decision& d);
  std::optional<Plan> late(PolicyReport& report);
  void step_current(const Job& job, Decision& d);
  SwapResult try_swap(const std::string& path, const std::string& params_json, const Job& job, Decision& d);
  void count_failure(const std::string& kind, const std::string& message, Decision& d);
  // A new plan from an answer: into the decision, and remembered as in force.
  void adopt(const PolicyAnswer& answer, Decision& d);
  bool file_changed();

  PolicyConfig cfg_;
  PolicyCluster cluster_;
  PolicyLimits limits_;
  std::unique_ptr<PolicyProcess> worker_;   // touched by the policy thread only, after start; never null
  std::deque<Job> window_;                  // recent stats, for a new policy's dry run
  SyncPlan sync_in_force_;                  // the sync mode of the last plan sent (bsp at first)
  std::vector<int64_t> micro_in_force_;     // the micro-batches of the last plan sent (none at first)
  int failures_ = 0;                        // in a row
  bool disabled_ = false;
  int64_t file_mtime_ns_ = 0, file_size_ = -1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;           // waiting for the thread
  bool has_result_ = false, stop_ = false, hung_ = false, in_flight_ = false;
  bool late_reported_ = false, wait_for_answers_ = false;
  int64_t job_iteration_ = -1;  // the stats in flight
  double started_ms_ = 0.0;          // when the thread took the job in flight
  Decision result_;
  struct SwapRequest {
    std::string path, params_json;
    std::promise<SwapResult> done;
  };
  std::vector<SwapRequest> swaps_;
  std::string name_;
  std::string params_in_force_;  // under mu_
  Totals totals_;
  std::thread thread_;
};

}  // namespace tandem
