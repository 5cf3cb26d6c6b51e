#pragma once
// The deadline of the budgeted Lua call running on this thread, for the C functions
// that call can reach and that may run long (lp_solve's solve): a budget's count hook
// cannot interrupt C code, so such a function stops at this deadline by itself.
//
// A deadline is the budget's (engine/script/budget.hpp): CPU time of this thread,
// which a slow or loaded machine does not use up (DESIGN.md habit 13), and a
// wall-clock backstop of seconds for a thread that gets almost no CPU at all.
//
// It lives here, not with the budget, so that the bindings need nothing of the script
// host: the host sets the deadline, the bindings test it. One slot per thread: a
// thread runs one budgeted call at a time (a call that starts inside another restores
// the outer deadline when it ends).
#include <cmath>

#include "engine/core/clock.hpp"

namespace tandem {

struct CallDeadline {
  ThreadCpuDeadline cpu;       // the budget: this thread's CPU time
  double wall_ms = HUGE_VAL;   // the backstop, on now_ms()'s clock

  enum Passed { none, cpu_time, wall_time };
  // Which limit has passed at `now` (now_ms()); the CPU clock is read only when it
  // may have.
  Passed check(double now) {
    if (cpu.passed(now)) return cpu_time;
    return now > wall_ms ? wall_time : none;
  }
  Passed check() { return check(now_ms()); }
};

// Whether this thread's call deadline has passed at `now` (now_ms()); false outside
// a budgeted call.
bool call_deadline_passed(double now);

// Publishes *deadline as this thread's call deadline for the scope's lifetime.
class CallDeadlineScope {
public:
  explicit CallDeadlineScope(CallDeadline* deadline);
  ~CallDeadlineScope();
  CallDeadlineScope(const CallDeadlineScope&) = delete;
  CallDeadlineScope& operator=(const CallDeadlineScope&) = delete;

private:
  CallDeadline* enclosing_;
};

}  // namespace tandem
