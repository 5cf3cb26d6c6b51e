#include "engine/train/interrupt.hpp"

#include <atomic>
#include <csignal>

namespace tandem {

namespace {
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }
}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted = false;
  std::signal(SIGINT, on_sigint);
}

InterruptGuard::~InterruptGuard() { std::signal(SIGINT, SIG_DFL); }

bool interrupted() { return g_interrupted; }

}  // namespace tandem
