#include "engine/dist/host_probe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "engine/core/error.hpp"
#include "engine/dist/launcher.hpp"

namespace tandem {

namespace {

// mpirun running `tandem version` on one slot of `host`, quietly, in a process group
// of its own (so a probe past its deadline ends with everything it started here).
pid_t start_probe(const HostSlots& host) {
  const std::vector<std::string> cmd = mpirun_command(1, {"version"}, {HostSlots{host.name, 1}});
  const pid_t pid = fork();
  TANDEM_CHECK(pid >= 0, "cannot fork to probe host '", host.name, "': ", std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0)
      for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::dup2(null_fd, fd);
    std::vector<char*> argv;
    for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    set_mpirun_environment();
    execvp(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

}  // namespace

std::vector<HostSlots> responding_hosts(const std::vector<HostSlots>& hosts, double timeout_s,
                                        std::vector<std::string>* why_not) {
  std::vector<pid_t> pids;
  for (const HostSlots& h : hosts) pids.push_back(start_probe(h));
  std::vector<int> ok(hosts.size(), -1);  // -1 running, 0 failed, 1 answered
  std::vector<std::string> why(hosts.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    bool running = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (ok[i] >= 0) continue;
      int status = 0;
      const pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i]) {
        ok[i] = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 1 : 0;
        if (!ok[i])
          why[i] = WIFEXITED(status) ? "the probe failed (exit " + std::to_string(WEXITSTATUS(status)) + ")"
                                     : "the probe was killed (signal " + std::to_string(WTERMSIG(status)) + ")";
      } else if (r < 0 && errno != EINTR) {
        ok[i] = 0;
        why[i] = std::string("the probe was lost: ") + std::strerror(errno);
      } else {
        running = true;
      }
    }
    if (!running) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (ok[i] < 0) {
          kill(-pids[i], SIGKILL);
          while (waitpid(pids[i], nullptr, 0) < 0 && errno == EINTR) {
          }
          ok[i] = 0;
          char t[32];
          std::snprintf(t, sizeof t, "%g", timeout_s);
          why[i] = std::string("no answer within ") + t + " s";
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<HostSlots> live;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (ok[i] == 1) {
      live.push_back(hosts[i]);
    } else if (why_not) {
      why_not->push_back(hosts[i].name + ": " + why[i]);
    }
  }
  return live;
}

}  // namespace tandem
