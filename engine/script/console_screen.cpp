#include "engine/script/console_screen.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "engine/core/write_all.hpp"

namespace tandem {

namespace {

struct Capture {
  int read_fd = -1;
  int saved_out = -1, saved_err = -1;  // the terminal's descriptors, kept above 10
};
std::mutex g_mu;
Capture g_capture;
std::atomic<int> g_pumps{0};  // copy threads still running

// At exit: the job has ended (the launcher waited for it), so its output has been
// written; give the copy a moment to put it on the screen. A writer that outlives
// the job (an orphan holding the pipe) cannot hold the exit up for long.
void wait_for_pumps() {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (g_pumps.load() > 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

bool capture_output_for_console() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_capture.read_fd >= 0) return true;
  if (!::isatty(STDIN_FILENO) || !::isatty(STDERR_FILENO)) return false;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return false;
  std::fflush(stdout);
  std::fflush(stderr);
  g_capture.saved_out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 10);
  g_capture.saved_err = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 10);
  if (g_capture.saved_out < 0 || g_capture.saved_err < 0) {
    for (int fd : {p[0], p[1], g_capture.saved_out, g_capture.saved_err})
      if (fd >= 0) ::close(fd);
    g_capture = Capture{};
    return false;
  }
  // dup2 leaves 1 and 2 without close-on-exec: a child started now inherits them.
  ::dup2(p[1], STDOUT_FILENO);
  ::dup2(p[1], STDERR_FILENO);
  ::close(p[1]);
  g_capture.read_fd = p[0];
  static const bool registered = (std::atexit(wait_for_pumps), true);
  (void)registered;
  return true;
}

int captured_output_fd() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_capture.read_fd;
}

int terminal_fd() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_capture.saved_out >= 0 ? g_capture.saved_out : STDOUT_FILENO;
}

void release_captured_output() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_capture.read_fd < 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(g_capture.saved_out, STDOUT_FILENO);
  ::dup2(g_capture.saved_err, STDERR_FILENO);
  ::close(g_capture.saved_out);
  ::close(g_capture.saved_err);
  const int fd = g_capture.read_fd;
  g_capture = Capture{};
  ++g_pumps;
  std::thread([fd] {
    char buf[8192];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      write_all(STDERR_FILENO, buf, static_cast<size_t>(n));
    }
    ::close(fd);
    --g_pumps;
  }).detach();
}

}  // namespace tandem
