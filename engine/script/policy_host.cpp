#include "engine/script/policy_host.hpp"

#include <sys/stat.h>

#include <cstring>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/train/memory_check.hpp"

namespace tandem {

namespace {

// The experiment's policy keys as the worker's limits.
PolicyLimits policy_limits(const PolicyConfig& cfg) {
  return {cfg.budget_ms, cfg.memory_mb, cfg.init_budget_ms.value_or(0.0)};
}

// How long collect() waits for a decision before it gives up on the policy thread.
// The thread bounds every call itself (PolicyProcess kills a worker past its
// deadlines), so this is only a backstop, on the wall clock with minutes of margin:
// a swap makes several requests (load, init, restore, with the setup's budget; save,
// the history and the dry run with a decision's), and a restart after a failure
// starts a worker before the next decision.
double hard_limit_ms(const PolicyLimits& limits) {
  return 4.0 * PolicyProcess::wall_deadline_ms(limits.setup_budget_ms()) +
         8.0 * PolicyProcess::wall_deadline_ms(limits.budget_ms);
}

std::string describe_device(const ExperimentConfig& cfg, int r) {
  if (!cfg.emulation.enabled) return "cpu";
  if (static_cast<size_t>(r) < cfg.emulation.workers.size()) {
    const WorkerEmulation& w = cfg.emulation.workers[static_cast<size_t>(r)];
    if (w.profile) return "emulated profile";
    return fmt::format("emulated speed {:g}", w.speed);
  }
  return "emulated speed 1";
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The global batch the stats were measured under: the plan in force's sum (B0 when
// that is not known).
int64_t observed_batch(const std::vector<int64_t>& in_force, int64_t b0) {
  const int64_t sum = std::accumulate(in_force.begin(), in_force.end(), int64_t{0});
  return sum > 0 ? sum : b0;
}

}  // namespace

PolicyCluster policy_cluster(const ExperimentConfig& cfg, int workers, bool measure_memory) {
  PolicyCluster c;
  c.workers = workers;
  c.global_batch = cfg.global_batch;
  c.global_batch_min = cfg.global_batch_min();
  c.global_batch_max = cfg.global_batch_max();
  c.lr_scaling = cfg.lr_scaling;
  c.min_batch.assign(static_cast<size_t>(workers), cfg.policy.min_batch);
  c.max_batch = cfg.policy.max_batch;
  c.max_batch.resize(static_cast<size_t>(workers), c.batch_max());
  if (measure_memory && cfg.policy.max_batch.empty()) {
    std::vector<std::string> why;
    const std::vector<int64_t> caps = measured_micro_caps(cfg, workers, &why);
    for (int r = 0; r < workers; ++r) {
      const int64_t cap = caps[static_cast<size_t>(r)];
      if (cap <= 0 || cap >= c.max_batch[static_cast<size_t>(r)]) continue;
      c.max_batch[static_cast<size_t>(r)] = cap;
      log::debug("policy: {} (measured; a larger share is computed in micro-batches)", why[static_cast<size_t>(r)]);
    }
  }
  for (int r = 0; r < workers; ++r) c.devices.push_back(describe_device(cfg, r));
  c.params_json = cfg.policy.params_json;
  c.history = cfg.policy.history;
  c.bsp_only = bsp_only_reason(cfg);
  c.accumulate = cfg.accumulate;
  if (cfg.accumulate == 1 && model_has_layer_state(cfg.model))
    c.micro_refused = "model '" + cfg.model.name + "' has batch norm, whose statistics would be each micro-batch's";
  const int64_t lo = std::accumulate(c.min_batch.begin(), c.min_batch.end(), int64_t{0});
  const int64_t hi = std::accumulate(c.max_batch.begin(), c.max_batch.end(), int64_t{0});
  // A worker's max_batch bounds its micro-batch (plan_problem): with micro-batches it
  // may take up to kMaxMicroBatches times as many samples.
  TANDEM_CHECK_HINT(lo <= cfg.global_batch && hi * kMaxMicroBatches >= cfg.global_batch,
                    "lower policy.min_batch or raise policy.max_batch so that some split of the global batch fits",
                    "no plan can satisfy the policy's bounds: the smallest batches add up to ", lo,
                    " and the largest to ", hi, " (", kMaxMicroBatches, " micro-batches of it each at most), but the "
                    "global batch is ", cfg.global_batch);
  return c;
}

std::string plan_problem(const PolicyAnswer& answer, const PolicyCluster& c) {
  std::string problem = plan_problem(answer.local_batch, c, answer.micro_batches);
  if (!problem.empty()) return problem;
  if (!c.micro_refused.empty() && !Plan{{}, {}, answer.micro_batches}.micro_counts_trivial())
    return "micro-batches refused: " + c.micro_refused;
  if (answer.sync.mode != SyncMode::bsp && !c.bsp_only.empty())
    return "sync mode " + std::string(sync_mode_name(answer.sync.mode)) + " refused: " + c.bsp_only;
  const Plan plan{answer.local_batch, answer.sync, answer.micro_batches};
  if (plan.sync.mode != SyncMode::bsp && plan.global_batch() != c.global_batch)
    return fmt::format("sync mode {} refused with a global batch of {}: the relaxed modes train with the experiment's "
                       "global_batch ({})", sync_mode_name(plan.sync.mode), plan.global_batch(), c.global_batch);
  try {
    plan.validate(c.workers, plan.global_batch());
  } catch (const std::exception& e) {
    return first_line(e.what());
  }
  return "";
}

std::string plan_problem(const std::vector<int64_t>& b, const PolicyCluster& c, const std::vector<int64_t>& micro) {
  if (static_cast<int>(b.size()) != c.workers)
    return fmt::format("{} local batches for {} workers", b.size(), c.workers);
  if (!micro.empty() && micro.size() != b.size())
    return fmt::format("{} micro-batch counts for {} workers", micro.size(), c.workers);
  for (size_t r = 0; r < b.size(); ++r) {
    const int64_t k = micro.empty() ? c.accumulate : micro[r];
    if (k < 1 || k > kMaxMicroBatches)
      return fmt::format("worker {} gets {} micro-batches, outside [1, {}]", r, k, kMaxMicroBatches);
    // The cap bounds what the worker holds at once: its micro-batch.
    const int64_t held = b[r] > 0 ? (b[r] + k - 1) / k : b[r];
    if (b[r] < c.min_batch[r] || held > c.max_batch[r])
      return k == 1 ? fmt::format("worker {} gets {}, outside its bounds [{}, {}]", r, b[r], c.min_batch[r],
                                  c.max_batch[r])
                    : fmt::format("worker {} gets {} in {} micro-batches of up to {}, outside its bounds [{}, {}] "
                                  "(max_batch bounds a micro-batch)", r, b[r], k, held, c.min_batch[r],
                                  c.max_batch[r]);
  }
  const int64_t sum = std::accumulate(b.begin(), b.end(), int64_t{0});
  if (c.batch_min() == c.batch_max() && sum != c.global_batch)
    return fmt::format("the local batches sum to {}, not the global batch {}", sum, c.global_batch);
  if (sum < c.batch_min() || sum > c.batch_max())
    return fmt::format("the local batches sum to {}, outside policy.global_batch [{}, {}]", sum, c.batch_min(),
                       c.batch_max());
  return "";
}

void check_policy(const ExperimentConfig& cfg, int workers) {
  const PolicyCluster cluster = policy_cluster(cfg, workers, /*measure_memory=*/true);
  try {
    PolicyProcess policy(cfg.policy.file, policy_limits(cfg.policy));
    policy.init(cluster);
  } catch (const PolicyFailure& f) {
    TANDEM_FAIL_HINT("fix the policy file, or leave policy.file unset to train with plan.kind",
                     "policy ", cfg.policy.file, " failed to start (", f.kind_name(), "): ", f.what());
  }
}

PolicyHost::PolicyHost(const PolicyConfig& cfg, PolicyCluster cluster)
    : cfg_(cfg), cluster_(std::move(cluster)), limits_(policy_limits(cfg)) {
  try {
    worker_ = std::make_unique<PolicyProcess>(cfg_.file, limits_);
    worker_->init(cluster_);
    params_in_force_ = worker_->params_in_force();
  } catch (const PolicyFailure& f) {
    TANDEM_FAIL_HINT("fix the policy file, or leave policy.file unset to train with plan.kind",
                     "policy ", cfg_.file, " failed to start (", f.kind_name(), "): ", f.what());
  }
  name_ = worker_->name();
  file_changed();  // records the file's current version
  log::info("policy {} ({}): budget {:g} ms of CPU ({:g} ms to load and init) and {:g} MB a call, {:.1f} MB after "
            "init; in worker process {} ({}){}", name_, cfg_.file, limits_.budget_ms, limits_.setup_budget_ms(),
            limits_.memory_mb, worker_->memory_mb(), worker_->pid(), worker_->confinement(),
            cfg_.watch ? "; reloaded when the file changes" : "");
  thread_ = std::thread([this] { run(); });
}

PolicyHost::~PolicyHost() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The thread's calls all end by their deadlines (the worker is killed past one).
  if (thread_.joinable()) thread_.join();
}

std::string PolicyHost::policy_name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return name_;
}

PolicyHost::Totals PolicyHost::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

std::future<SwapResult> PolicyHost::swap(const std::string& path, const std::string& params_json) {
  std::lock_guard<std::mutex> lock(mu_);
  swaps_.push_back(SwapRequest{path, params_json, std::promise<SwapResult>()});
  return swaps_.back().done.get_future();
}

// The policy thread sleeps between jobs, holding nothing; with the lock held and no
// job in flight it cannot wake, so the worker is ours for the call.
std::string PolicyHost::saved_state() {
  std::lock_guard<std::mutex> lock(mu_);
  if (hung_ || in_flight_ || job_ || disabled_ || !worker_->alive()) return "";
  try {
    return worker_->save_literal();
  } catch (const PolicyFailure& f) {
    log::warn("policy {}: its state is left out of the checkpoint: {}", name_, f.what());
    return "";
  }
}

bool PolicyHost::restore_state(const std::string& state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (hung_ || in_flight_ || job_ || !worker_->alive()) return false;
  try {
    return worker_->restore_literal(state);
  } catch (const PolicyFailure& f) {
    log::warn("policy {}: the checkpoint's policy state was not taken; it starts fresh: {}", name_, f.what());
    return false;
  }
}

// The window as bytes: count, then per job its iteration, cluster stats, and the
// workers' stats and batches (trivially copyable, this build's layout).
std::string PolicyHost::saved_window() {
  std::lock_guard<std::mutex> lock(mu_);
  if (hung_ || in_flight_ || job_) return "";
  std::string out;
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  const uint64_t jobs = window_.size();
  put(&jobs, sizeof jobs);
  for (const Job& j : window_) {
    const uint64_t n = j.stats.size();
    put(&j.iteration, sizeof j.iteration);
    put(&j.cluster, sizeof j.cluster);
    put(&n, sizeof n);
    put(j.stats.data(), n * sizeof(WorkerStats));
    put(j.in_force.data(), j.in_force.size() * sizeof(int64_t));
  }
  return out;
}

bool PolicyHost::restore_window(const std::string& bytes, const SyncPlan& in_force) {
  std::lock_guard<std::mutex> lock(mu_);
  if (hung_ || in_flight_ || job_ || bytes.empty() || !worker_->alive()) return false;
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (at + n > bytes.size()) return false;
    std::memcpy(p, bytes.data() + at, n);
    at += n;
    return true;
  };
  uint64_t jobs = 0;
  std::deque<Job> window;
  // A checkpoint's bytes: no more jobs than the history holds (each is a call into
  // the policy), and every record where its slot says.
  if (!get(&jobs, sizeof jobs) || jobs > static_cast<uint64_t>(std::max(1, cluster_.history))) return false;
  for (uint64_t k = 0; k < jobs; ++k) {
    Job j;
    uint64_t n = 0;
    if (!get(&j.iteration, sizeof j.iteration) || !get(&j.cluster, sizeof j.cluster) || !get(&n, sizeof n) ||
        n != static_cast<uint64_t>(cluster_.workers))
      return false;
    j.stats.resize(n);
    j.in_force.resize(n);
    if (!get(j.stats.data(), n * sizeof(WorkerStats)) || !get(j.in_force.data(), n * sizeof(int64_t))) return false;
    for (uint64_t r = 0; r < n; ++r)
      if (!stats_record_fits(j.stats[r], static_cast<int>(r), cluster_.workers) || j.in_force[r] < 0) return false;
    if (!known_sync_mode(j.cluster.sync_mode)) return false;
    window.push_back(std::move(j));
  }
  if (at != bytes.size()) return false;
  try {
    for (const Job& j : window) worker_->observe(j.iteration, observed_batch(j.in_force, cluster_.global_batch), j.stats, j.cluster);
  } catch (const PolicyFailure& f) {
    log::warn("policy {}: the checkpoint's stats history was not taken: {}", name_, f.what());
    return false;
  }
  window_ = std::move(window);
  sync_in_force_ = in_force.mode == SyncMode::bsp ? SyncPlan{} : in_force;
  return true;
}

std::string PolicyHost::policy_file() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cfg_.file;
}

std::string PolicyHost::params_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cluster_.params_json;
}

std::string PolicyHost::params_in_force() const {
  std::lock_guard<std::mutex> lock(mu_);
  return params_in_force_;
}

void PolicyHost::submit(int64_t iteration, const std::vector<WorkerStats>& stats, const ClusterStats& cluster) {
  std::vector<int64_t> in_force;
  for (const WorkerStats& w : stats) in_force.push_back(w.local_batch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (hung_ || in_flight_) return;  // a hung thread takes nothing more; one call at a time
    job_ = Job{iteration, stats, std::move(in_force), cluster};
    job_iteration_ = iteration;
    in_flight_ = true;
    has_result_ = false;
    started_ms_ = now_ms();
  }
  cv_.notify_all();
}

// Training waits for a decision up to the call's budget (plus kCollectGraceMs for the
// round trip to the worker), never longer: a call still running then is left to
// finish (or to be killed at its deadline) in the background, and its answer is
// taken at a later boundary. Until then no new stats are submitted.
std::optional<Plan> PolicyHost::collect(PolicyReport& report) {
  const double start = now_ms();
  std::unique_lock<std::mutex> lock(mu_);
  report = PolicyReport{};
  report.policy = name_;
  if (hung_) {
    report.event = "hung";
    return std::nullopt;
  }
  if (!in_flight_) return std::nullopt;  // nothing asked yet (the first iterations)
  const double wait_until = wait_for_answers_ ? started_ms_ + hard_limit_ms(limits_)
                                              : started_ms_ + limits_.budget_ms + kCollectGraceMs;
  while (!has_result_) {
    const double left = wait_until - now_ms();
    if (left <= 0) break;
    cv_.wait_for(lock, std::chrono::duration<double, std::milli>(std::min(left, 50.0)));
  }
  report.wait_ms = now_ms() - start;
  if (!has_result_) return late(report);
  in_flight_ = false;
  has_result_ = false;
  late_reported_ = false;
  Decision d = std::move(result_);
  d.report.wait_ms = report.wait_ms;
  report = std::move(d.report);
  return std::move(d.plan);
}

// Under mu_: the call in flight is past its budget. Said once; the backstop (the
// thread itself kills a worker past its deadline, so this means the thread is stuck)
// abandons the policy.
std::optional<Plan> PolicyHost::late(PolicyReport& report) {
  if (now_ms() < started_ms_ + hard_limit_ms(limits_)) {
    if (!late_reported_) {
      late_reported_ = true;
      report.event = "late";
      report.reason = fmt::format("policy {} is still deciding on iteration {}'s stats after {:.0f} ms (training "
                                  "waits at most its budget, {:g} ms, + {:g} ms): training goes on with the plan in "
                                  "force, the answer is taken when it comes",
                                  name_, job_iteration_, now_ms() - started_ms_, limits_.budget_ms, kCollectGraceMs);
    }
    return std::nullopt;
  }
  hung_ = true;
  report.event = "hung";
  report.reason = fmt::format("a call of policy {} has not returned {:.0f} ms after it started (budget {:g} ms of "
                              "CPU; every request to its worker has a deadline, so the policy thread is stuck): "
                              "abandoned; training goes on with the last good plan", name_, now_ms() - started_ms_,
                              limits_.budget_ms);
  totals_.disabled = true;
  log::error("{}", report.reason);
  return std::nullopt;
}

void PolicyHost::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || job_.has_value(); });
    if (stop_) return;
    Job job = std::move(*job_);
    job_.reset();
    lock.unlock();
    Decision d = decide(job);
    lock.lock();
    result_ = std::move(d);
    has_result_ = true;
    cv_.notify_all();
  }
}

bool PolicyHost::file_changed() {
  struct stat st {};
  if (::stat(cfg_.file.c_str(), &st) != 0) return false;  // being rewritten: look again next time
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const int64_t size = static_cast<int64_t>(st.st_size);
  const bool changed = file_size_ >= 0 && (mtime != file_mtime_ns_ || size != file_size_);
  file_mtime_ns_ = mtime;
  file_size_ = size;
  return changed;
}

// On the policy thread.
PolicyHost::Decision PolicyHost::decide(const Job& job) {
  Decision d;
  d.report.from_iteration = job.iteration;
  d.report.policy = name_;

  // A swap asked for through the API wins over a file change; earlier requests are
  // superseded by the latest.
  std::vector<SwapRequest> requests;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests.swap(swaps_);
  }
  std::optional<std::string> swap_to;
  std::string params;
  if (!requests.empty()) {
    swap_to = requests.back().path;
    params = requests.back().params_json;
    for (size_t i = 0; i + 1 < requests.size(); ++i)
      requests[i].done.set_value({false, requests[i].path, "superseded by a later swap to " + *swap_to});
  } else if (cfg_.watch && file_changed()) {
    swap_to = cfg_.file;
    log::info("policy file {} changed: loading it", cfg_.file);
  }

  bool swapped = false;
  if (swap_to) {
    SwapResult r = try_swap(*swap_to, params, job, d);
    swapped = r.ok;
    if (!requests.empty()) requests.back().done.set_value(r);
  }
  if (!swapped && ensure_worker(d)) step_current(job, d);

  window_.push_back(job);
  // The whole history (a dry run replays it, and the oldest falls out as the new
  // stats go in): what a checkpoint saves of it is what the policy saw.
  while (static_cast<int>(window_.size()) > std::max(1, cluster_.history)) window_.pop_front();
  std::lock_guard<std::mutex> lock(mu_);
  totals_.disabled = disabled_;
  return d;
}

// A worker that crashed or was killed is replaced by a fresh one, loaded, initialised
// and given the stats history (its saved state died with it).
bool PolicyHost::ensure_worker(Decision& d) {
  if (disabled_ || worker_->alive()) return true;
  const double start = now_ms();
  try {
    auto fresh = std::make_unique<PolicyProcess>(cfg_.file, limits_);
    fresh->init(cluster_);
    for (const Job& past : window_) fresh->observe(past.iteration, observed_batch(past.in_force, cluster_.global_batch), past.stats, past.cluster);
    worker_ = std::move(fresh);
  } catch (const PolicyFailure& f) {
    d.report.cost_ms += now_ms() - start;
    count_failure(f.kind_name(), "restarting the worker process of policy " + name_ + ": " + f.what(), d);
    return false;
  }
  d.report.cost_ms += now_ms() - start;
  log::info("policy {}: a fresh worker process ({}) took over in {:.0f} ms", name_, worker_->pid(), now_ms() - start);
  return true;
}

void PolicyHost::step_current(const Job& job, Decision& d) {
  if (disabled_) {
    if (d.report.event == "idle") d.report.event = "disabled";
    return;
  }
  PolicyAnswer answer;
  try {
    answer = worker_->step(job.iteration, observed_batch(job.in_force, cluster_.global_batch), job.stats, job.cluster);
  } catch (const PolicyFailure& f) {
    d.report.cost_ms += worker_->last_call_ms();
    // Interrupted mid-call (past its budget or its memory cap), the policy's tables
    // may be half-updated: the next decision runs in a fresh worker. A plain error
    // the policy raised leaves its state as the policy chose.
    if (f.kind() == PolicyFailure::Timeout || f.kind() == PolicyFailure::Memory) worker_->kill();
    count_failure(f.kind_name(), f.what(), d);
    return;
  }
  d.report.cost_ms += worker_->last_call_ms();
  if (!answer.keep) {
    const std::string problem = plan_problem(answer, cluster_);
    if (!problem.empty()) {
      count_failure("rejected", "policy " + name_ + " returned an invalid plan: " + problem, d);
      return;
    }
  }
  failures_ = 0;
  if (d.report.event == "idle") d.report.reason = answer.reason;  // else: a failed swap's reason
  d.report.metrics = answer.metrics;
  if (answer.keep || (answer.local_batch == job.in_force && answer.sync == sync_in_force_ &&
                      answer.micro_batches == micro_in_force_)) {
    if (d.report.event == "idle") d.report.event = "keep";
    return;
  }
  if (d.report.event == "idle") d.report.event = "plan";
  adopt(answer, d);
}

void PolicyHost::count_failure(const std::string& kind, const std::string& message, Decision& d) {
  ++failures_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++totals_.failures;
    if (kind == "rejected") ++totals_.rejected;
  }
  d.report.event = kind;
  d.report.failed = true;
  d.report.reason = first_line(message);
  log::warn("policy {} at iteration {} ({}, {} in a row): {}", name_, d.report.from_iteration, kind, failures_,
               message);
  if (failures_ >= cfg_.max_failures) {
    disabled_ = true;
    d.report.event = "disabled";
    log::error("policy {} failed {} times in a row: it is no longer called; training goes on with the last good "
                  "plan (fix the file to have it reloaded{})", name_, failures_,
                  cfg_.watch ? "" : ", or swap in another policy");
  }
}

SwapResult PolicyHost::try_swap(const std::string& path, const std::string& params_json, const Job& job,
                                Decision& d) {
  PolicyCluster cluster = cluster_;
  if (!params_json.empty()) cluster.params_json = params_json;
  SwapResult r;
  r.policy = path;
  const double start = now_ms();
  std::unique_ptr<PolicyProcess> next;
  PolicyAnswer answer;
  std::string stage = "loading";
  try {
    next = std::make_unique<PolicyProcess>(path, limits_);
    stage = "init";
    next->init(cluster);
    stage = "handing over state";
    if (!disabled_ && worker_->alive()) next->restore_literal(worker_->save_literal());
    stage = "dry run";
    for (const Job& past : window_) next->observe(past.iteration, observed_batch(past.in_force, cluster_.global_batch), past.stats, past.cluster);
    answer = next->step(job.iteration, observed_batch(job.in_force, cluster_.global_batch), job.stats, job.cluster);
    if (!answer.keep) {
      const std::string problem = plan_problem(answer, cluster_);
      if (!problem.empty()) throw PolicyFailure(PolicyFailure::Garbage, "the dry run returned an invalid plan: " + problem);
    }
  } catch (const PolicyFailure& f) {
    d.report.cost_ms += now_ms() - start;
    r.message = fmt::format("policy {} not swapped in ({} failed, {}): {}", path, stage, f.kind_name(), f.what());
    d.report.event = "swap_failed";
    d.report.reason = first_line(r.message);
    log::warn("{}\n  the current policy {} keeps running", r.message, disabled_ ? "(none: disabled)" : name_);
    std::lock_guard<std::mutex> lock(mu_);
    ++totals_.swap_failures;
    return r;
  }
  d.report.cost_ms += now_ms() - start;
  const std::string old = name_;
  worker_ = std::move(next);  // the old worker is killed
  failures_ = 0;
  disabled_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    name_ = worker_->name();
    cfg_.file = path;
    cluster_.params_json = cluster.params_json;
    params_in_force_ = worker_->params_in_force();
    ++totals_.swaps;
  }
  file_mtime_ns_ = 0;
  file_size_ = -1;
  file_changed();
  r.ok = true;
  r.message = fmt::format("policy {} swapped in for {} (dry run on iteration {}: {})", name_, old, job.iteration,
                          answer.keep ? "keep the plan" : "a new plan");
  log::info("{}", r.message);
  d.report.event = "swapped";
  d.report.policy = name_;
  d.report.reason = answer.reason.empty() ? r.message : answer.reason;
  d.report.metrics = answer.metrics;
  if (!answer.keep && (answer.local_batch != job.in_force || answer.sync != sync_in_force_ ||
                       answer.micro_batches != micro_in_force_))
    adopt(answer, d);
  return r;
}

void PolicyHost::adopt(const PolicyAnswer& answer, Decision& d) {
  d.report.plan = answer.local_batch;
  d.report.sync = answer.sync.str();
  d.plan = Plan{answer.local_batch, answer.sync, answer.micro_batches};
  sync_in_force_ = answer.sync;  // the trainer runs every plan it is given
  micro_in_force_ = answer.micro_batches;
}

}  // namespace tandem
