#include "engine/script/policy_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "engine/core/clock.hpp"

extern char** environ;

namespace tandem {

namespace {

// Time for a worker to start (exec, the dynamic linker, a Lua state): on top of the
// first request's deadline; a loaded machine can take a second or more.
constexpr double kStartGraceMs = 3000.0;

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
  return TANDEM_POLICY_WORKER;
}

// Validation bounds policy.budget_ms; the clamp keeps a deadline finite whatever
// reaches here.
double PolicyProcess::deadline_ms(double budget_ms) { return 2.0 * std::min(budget_ms, 3.6e6) + 100.0; }

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
  WireWriter w;
  w.put_string(path);
  w.put<double>(limits.budget_ms);
  w.put<double>(limits.memory_mb);
  try {
    const std::string body = request(PolicyOp::load, w.bytes(), "loading", kStartGraceMs);
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

void PolicyProcess::died(const char* what, bool timed_out, double waited_ms) {
  std::string cause;
  if (timed_out) {
    end();
    throw PolicyFailure(PolicyFailure::Hung,
                        "policy " + path_ + " did not finish " + what + " within " + std::to_string(int(waited_ms)) +
                            " ms (budget " + std::to_string(int(limits_.budget_ms)) +
                            " ms; stuck where its budget cannot reach, in C code or an error handler): its worker "
                            "process was killed");
  }
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

std::string PolicyProcess::request(PolicyOp op, const std::string& payload, const char* what, double extra_ms) {
  if (!alive())
    throw PolicyFailure(PolicyFailure::Crash, "the worker process of policy " + path_ + " is gone");
  std::string frame(1, static_cast<char>(op));
  frame += payload;
  const double start = now_ms();
  if (!send_frame(fd_, frame)) died(what, false, 0.0);
  std::string reply;
  bool timed_out = false;
  const double deadline = start + deadline_ms(limits_.budget_ms) + extra_ms;
  if (!recv_frame(fd_, reply, deadline, &timed_out)) died(what, timed_out, now_ms() - start);
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
  const std::string body = request(PolicyOp::init, w.bytes(), "init(cluster)", 0.0);
  WireReader r(body);
  params_in_force_ = r.get_string("init.params_in_force");
}

PolicyAnswer PolicyProcess::step(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                                 const ClusterStats& cluster) {
  const std::string body = request(PolicyOp::step, stats_payload(iteration, global_batch, stats, cluster),
                                   "step(stats)", 0.0);
  WireReader r(body);
  PolicyAnswer a = get_answer(r);
  r.expect_end("answer");
  return a;
}

void PolicyProcess::observe(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                            const ClusterStats& cluster) {
  request(PolicyOp::observe, stats_payload(iteration, global_batch, stats, cluster), "recording stats", 0.0);
}

std::string PolicyProcess::save_literal() {
  const std::string body = request(PolicyOp::save, "", "save()", 0.0);
  WireReader r(body);
  return r.get_string("save.state");
}

bool PolicyProcess::restore_literal(const std::string& literal) {
  WireWriter w;
  w.put_string(literal);
  const std::string body = request(PolicyOp::restore, w.bytes(), "restore(state)", 0.0);
  WireReader r(body);
  return r.get<uint8_t>("restore.done") != 0;
}

}  // namespace tandem
