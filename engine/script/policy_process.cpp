#include "engine/script/policy_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "engine/core/build_paths.hpp"
#include "engine/core/clock.hpp"
#include "engine/script/budget.hpp"

extern char** environ;

namespace tandem {

namespace {

// Time for a worker to start (exec, the dynamic linker, a Lua state): on top of the
// first request's wall-clock deadline; a loaded machine can take a second or more.
constexpr double kStartGraceMs = 3000.0;
// On top of the budget's wall-clock backstop (budget.hpp), which the worker applies
// itself: its own interruption, and the round trip, come before the host's verdict.
constexpr double kReplyGraceMs = 2000.0;

// A process's CPU time from /proc/PID/stat (utime + stime, in clock ticks), where
// its CPU clock cannot be read; NaN when the process is gone.
double proc_stat_cpu_ms(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return NAN;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* at = std::strrchr(buf, ')');  // the command's name may hold spaces and ')'
  unsigned long long utime = 0, stime = 0;
  // After the name: state, then fields 4..13, then utime (14) and stime (15).
  if (!at || std::sscanf(at + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return NAN;
  return 1e3 * static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + " (SIG" + std::string(name ? name : "?") + ": " +
           strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (wait status " + std::to_string(status) + ")";
}

// The environment a worker gets: only what finding tandem's files and libraries needs.
std::vector<std::string> worker_environment() {
  std::vector<std::string> env;
  for (const char* name : {"TANDEM_HOME", "LD_LIBRARY_PATH", "LANG", "LC_ALL"})
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
  return env;
}

}  // namespace

std::string policy_worker_path() {
  if (const char* p = std::getenv("TANDEM_POLICY_WORKER"); p && *p) return p;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path() / "tandem-policy-worker";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return configured_policy_worker();
}

// Validation bounds policy.budget_ms; the clamp keeps a deadline finite whatever
// reaches here.
double PolicyProcess::cpu_deadline_ms(double budget_ms) { return 2.0 * std::min(budget_ms, 3.6e6) + 100.0; }
double PolicyProcess::wall_deadline_ms(double budget_ms) {
  return wall_backstop_ms(std::min(budget_ms, 3.6e6)) + kReplyGraceMs;
}

double PolicyProcess::worker_cpu_ms() const {
  const double ms = has_cpu_clock_ ? cpu_clock_ms(cpu_clock_) : NAN;
  return std::isnan(ms) ? proc_stat_cpu_ms(pid_) : ms;
}

PolicyProcess::PolicyProcess(const std::string& path, const PolicyLimits& limits) : path_(path), limits_(limits) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw PolicyFailure(PolicyFailure::Crash, std::string("cannot create the policy worker's socket: ") +
                                                  std::strerror(errno) + "\n  what to do: raise the open-file limit");
  fd_ = sv[0];
  const int child_socket = high_fd(sv[1]);
  open_stats_region();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, child_socket, 3);
  if (stats_fd_ >= 0) posix_spawn_file_actions_adddup2(&actions, stats_fd_, 4);
  // Nothing else of rank 0's reaches the worker (MPI's pipes and sockets included).
  posix_spawn_file_actions_addclosefrom_np(&actions, 5);
  const std::string exe = policy_worker_path();
  const std::vector<std::string> env = worker_environment();
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>("--serve-fd-3"), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_socket);
  if (rc != 0) {
    end();
    throw PolicyFailure(PolicyFailure::Crash, "cannot start the policy worker " + exe + ": " + std::strerror(rc) +
                                                  "\n  what to do: build the tandem-policy-worker target, or set "
                                                  "TANDEM_POLICY_WORKER to its path");
  }
  pid_ = pid;
  has_cpu_clock_ = ::clock_getcpuclockid(pid_, &cpu_clock_) == 0;
  WireWriter w;
  w.put_string(path);
  w.put<double>(limits.budget_ms);
  w.put<double>(limits.memory_mb);
  w.put<double>(limits.setup_ms);
  try {
    const std::string body = request(PolicyOp::load, w.bytes(), "loading", limits.setup_budget_ms(), kStartGraceMs);
    WireReader r(body);
    name_ = r.get_string("load.name");
    confinement_ = r.get_string("load.confinement");
  } catch (...) {
    end();  // no destructor runs for a constructor that throws
    throw;
  }
}

PolicyProcess::~PolicyProcess() { end(); }

// Killed, not asked to leave: nothing of the policy's runs at the end.
void PolicyProcess::end() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (stats_) ::munmap(stats_, kStatsRegionBytes);
  stats_ = nullptr;
  if (stats_fd_ >= 0) ::close(stats_fd_);
  stats_fd_ = -1;
}

void PolicyProcess::hung(const char* what, double budget_ms, double limit_ms, double waited_ms, double cpu_ms,
                         bool on_cpu) {
  end();
  char why[600];
  if (on_cpu)
    std::snprintf(why, sizeof why,
                  "it used %.0f ms of CPU without answering (the deadline: %.0f ms of CPU, twice its budget of %.0f "
                  "ms + 100 ms), in %.0f ms on the clock; stuck where its budget cannot reach, in C code or an "
                  "error handler",
                  cpu_ms, limit_ms, budget_ms, waited_ms);
  else
    std::snprintf(why, sizeof why,
                  "no answer in %.0f ms on the clock (the backstop: %.0f ms, for a budget of %.0f ms of CPU), in "
                  "which it got only %.0f ms of CPU: the process was stopped or starved, or the machine is "
                  "overloaded",
                  waited_ms, limit_ms, budget_ms, cpu_ms);
  throw PolicyFailure(PolicyFailure::Hung, "policy " + path_ + " did not finish " + what + " within its deadline: " +
                                               why + "; its worker process was killed");
}

void PolicyProcess::died(const char* what) {
  std::string cause;
  // The socket closed: the worker is exiting, or closed it and lingers. Give it a
  // moment to be reaped with its own cause, then make sure.
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 100 && (got = ::waitpid(pid_, &status, WNOHANG)) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (got == pid_) {
    cause = describe_status(status);
    pid_ = -1;
  } else {
    cause = "closed its socket";
  }
  end();
  throw PolicyFailure(PolicyFailure::Crash, "the worker process of policy " + path_ + " " + cause + " while " + what +
                                                "; a fresh one is started when the policy is next called");
}

// Waits for the reply until the worker has used its CPU deadline on the call, or
// the wall-clock deadline has passed. The worker runs one thread (its seccomp filter
// refuses new ones), so it cannot use more CPU time than passes on the clock: its
// CPU clock needs reading only once cpu_limit of wall time has passed, and again no
// sooner than the CPU it has left.
std::string PolicyProcess::request(PolicyOp op, const std::string& payload, const char* what, double budget_ms,
                                   double extra_ms) {
  if (!alive())
    throw PolicyFailure(PolicyFailure::Crash, "the worker process of policy " + path_ + " is gone");
  std::string frame(1, static_cast<char>(op));
  frame += payload;
  const double start = now_ms();
  const double cpu_start = worker_cpu_ms();
  if (!send_frame(fd_, frame)) died(what);
  const double cpu_limit = cpu_deadline_ms(budget_ms), wall_limit = wall_deadline_ms(budget_ms) + extra_ms;
  const double wall_deadline = start + wall_limit;
  double look = start + cpu_limit;
  while (!wait_readable(fd_, std::min(look, wall_deadline))) {
    const double now = now_ms();
    const double used = worker_cpu_ms() - cpu_start;
    if (used >= cpu_limit) hung(what, budget_ms, cpu_limit, now - start, used, true);
    if (now >= wall_deadline) hung(what, budget_ms, wall_limit, now - start, used, false);
    look = std::isnan(used) ? wall_deadline : now + std::max(cpu_limit - used, 1.0);
  }
  std::string reply;
  bool timed_out = false;
  if (!recv_frame(fd_, reply, wall_deadline, &timed_out)) {
    if (timed_out) hung(what, budget_ms, wall_limit, now_ms() - start, worker_cpu_ms() - cpu_start, false);
    died(what);
  }
  round_trip_ms_ = now_ms() - start;
  WireReader r(reply);
  const bool ok = r.get<uint8_t>("reply.ok") != 0;
  if (!ok) {
    const auto kind = r.get<uint8_t>("reply.kind");
    last_call_ms_ = r.get<double>("reply.cost");
    std::string message = r.get_string("reply.message");
    if (kind > PolicyFailure::Hung) throw PolicyFailure(PolicyFailure::Garbage, "a reply of unknown kind");
    throw PolicyFailure(static_cast<PolicyFailure::Kind>(kind), std::move(message));
  }
  last_call_ms_ = r.get<double>("reply.cost");
  memory_mb_ = r.get<double>("reply.memory");
  std::string body = r.get_string("reply.body");
  r.expect_end("reply");
  return body;
}

// The stats go into the shared region when they fit (the message then carries only
// their count), else inline.
std::string PolicyProcess::stats_payload(int64_t iteration, int64_t global_batch,
                                         const std::vector<WorkerStats>& stats, const ClusterStats& cluster) {
  WireWriter w;
  w.put(iteration);
  w.put(global_batch);
  const size_t bytes = stats.size() * sizeof(WorkerStats);
  if (stats_ && bytes <= kStatsRegionBytes) {
    std::memcpy(stats_, stats.data(), bytes);
    w.put<uint8_t>(1);
    w.put<uint64_t>(stats.size());
  } else {
    w.put<uint8_t>(0);
    w.put_vector(stats);
  }
  w.put(cluster);
  return w.bytes();
}

// A descriptor at 10 or above (and the original closed), so that the spawn's dup2s
// onto 3 and 4 cannot overwrite one another's source.
int PolicyProcess::high_fd(int fd) {
  const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (high < 0) return fd;
  ::close(fd);
  return high;
}

// The region the worker maps read-only as its fd 4: sparse, so only the pages the
// stats touch take memory. Without it (no memfd), stats travel inline.
void PolicyProcess::open_stats_region() {
  const int fd = ::memfd_create("tandem-policy-stats", MFD_CLOEXEC);
  if (fd < 0) return;
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(kStatsRegionBytes)) == 0)
    p = ::mmap(nullptr, kStatsRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return;
  }
  stats_fd_ = high_fd(fd);
  stats_ = p;
}

void PolicyProcess::init(const PolicyCluster& cluster) {
  WireWriter w;
  put_cluster(w, cluster);
  const std::string body = request(PolicyOp::init, w.bytes(), "init(cluster)", limits_.setup_budget_ms());
  WireReader r(body);
  params_in_force_ = r.get_string("init.params_in_force");
}

PolicyAnswer PolicyProcess::step(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                                 const ClusterStats& cluster) {
  const std::string body = request(PolicyOp::step, stats_payload(iteration, global_batch, stats, cluster),
                                   "step(stats)", limits_.budget_ms);
  WireReader r(body);
  PolicyAnswer a = get_answer(r);
  r.expect_end("answer");
  return a;
}

void PolicyProcess::observe(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                            const ClusterStats& cluster) {
  request(PolicyOp::observe, stats_payload(iteration, global_batch, stats, cluster), "recording stats",
          limits_.budget_ms);
}

std::string PolicyProcess::save_literal() {
  const std::string body = request(PolicyOp::save, "", "save()", limits_.budget_ms);
  WireReader r(body);
  return r.get_string("save.state");
}

bool PolicyProcess::restore_literal(const std::string& literal) {
  WireWriter w;
  w.put_string(literal);
  const std::string body = request(PolicyOp::restore, w.bytes(), "restore(state)", limits_.setup_budget_ms());
  WireReader r(body);
  return r.get<uint8_t>("restore.done") != 0;
}

}  // namespace tandem
