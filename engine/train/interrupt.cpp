#include "engine/train/interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <initializer_list>

namespace tandem {

namespace {
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_mpirun{0};
std::atomic<int> g_forwarded{0};
std::atomic<bool> g_signalled{false};

// A second Ctrl-C ends the process as Ctrl-C does when nothing listens.
extern "C" void on_interrupt(int sig) {
  if (sig == SIGINT && g_interrupted.exchange(true)) {
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
  }
  g_interrupted = true;
}

// Async-signal-safe: an atomic, kill() and write() only.
extern "C" void on_launcher_signal(int sig) {
  const pid_t pid = g_mpirun.load();
  if (pid <= 0) return;
  g_signalled = true;
  if (sig != SIGINT) {
    kill(pid, SIGTERM);
    return;
  }
  g_interrupted = true;
  if (g_forwarded.fetch_add(1) == 0) {
    static const char kMsg[] =
        "\ntandem: interrupted: every worker stops after this iteration and writes the summary "
        "(Ctrl-C again to kill the job)\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    kill(pid, SIGUSR1);
  } else {
    kill(pid, SIGINT);
  }
}

void set_handler(int sig, void (*handler)(int)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}
}  // namespace

InterruptGuard::InterruptGuard() {
  set_handler(SIGINT, on_interrupt);
  set_handler(SIGUSR1, on_interrupt);
}

InterruptGuard::~InterruptGuard() { set_handler(SIGINT, SIG_DFL); }

bool interrupted() { return g_interrupted; }

bool signalled() { return g_signalled; }

void listen_for_forwarded_interrupt() { set_handler(SIGUSR1, on_interrupt); }

void forward_interrupts(int mpirun) {
  g_mpirun = mpirun;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) set_handler(sig, mpirun > 0 ? on_launcher_signal : SIG_DFL);
}

}  // namespace tandem
