#pragma once
// Wall-clock timing for stats and progress: steady_clock, in milliseconds as double,
// because every per-worker number in tandem (compute_ms, comm_ms, idle_ms) is in ms.
//
// And CPU time, for budgets (DESIGN.md habit 13): what a thread or a process actually
// ran, which a slow or loaded machine does not inflate the way it stretches the wall
// clock. Reading a CPU clock is a system call (some 0.1 to 1 us, more under a seccomp
// filter) where now_ms() is a vDSO read (some 20 ns), so a deadline that is tested
// often (a Lua count hook, lp_solve's abort callback) reads it only when enough wall
// time has passed for the CPU time to have reached the deadline: ThreadCpuDeadline.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tandem {

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

class Stopwatch {
public:
  Stopwatch() : start_(now_ms()) {}
  void reset() { start_ = now_ms(); }
  double elapsed_ms() const { return now_ms() - start_; }

private:
  double start_;
};

// ms of a CPU clock (CLOCK_THREAD_CPUTIME_ID, CLOCK_PROCESS_CPUTIME_ID, or another
// process's from clock_getcpuclockid); NaN when it cannot be read (a process gone).
inline double cpu_clock_ms(clockid_t clock) {
  timespec t{};
  if (::clock_gettime(clock, &t) != 0) return NAN;
  return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
}

// The CPU time (user + system) the calling thread has run, in ms.
inline double thread_cpu_ms() { return cpu_clock_ms(CLOCK_THREAD_CPUTIME_ID); }

// A limit on the calling thread's CPU time, from its construction; cheap to test
// often. A thread runs at most as much CPU time as wall time passes, so until the
// wall clock reaches the next possible expiry the answer is known without reading
// the CPU clock. Default-constructed, it never passes. One thread only.
class ThreadCpuDeadline {
public:
  ThreadCpuDeadline() = default;
  explicit ThreadCpuDeadline(double cpu_ms)
      : limit_ms_(cpu_ms), start_cpu_ms_(thread_cpu_ms()), next_look_ms_(now_ms() + cpu_ms) {}

  // Whether the thread has used its CPU time; `now` is now_ms().
  bool passed(double now) {
    if (now < next_look_ms_) return false;
    const double left = limit_ms_ - used_ms();
    if (std::isnan(left)) {  // no CPU clock: the caller's wall-clock backstop decides
      next_look_ms_ = HUGE_VAL;
      return false;
    }
    if (left <= 0) return true;
    // Not before `left` of wall time, and not more often than every 50 us near the end.
    next_look_ms_ = now + std::max(left, 0.05);
    return false;
  }
  bool passed() { return passed(now_ms()); }
  double used_ms() const { return thread_cpu_ms() - start_cpu_ms_; }
  double limit_ms() const { return limit_ms_; }

private:
  double limit_ms_ = HUGE_VAL;
  double start_cpu_ms_ = 0.0;
  double next_look_ms_ = HUGE_VAL;
};

}  // namespace tandem
