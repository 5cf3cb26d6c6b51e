#pragma once
// The time budget of one Lua call, the same for a policy's calls (policy_sandbox.hpp),
// a console command (repl.hpp) and the loading of an experiment or model file
// (load_deadline.hpp): DESIGN.md habit 7, budgets stop runaway calls early.
//
// A budget counts the CPU time of the thread that runs the call, not the wall clock
// (DESIGN.md habit 13): on a slow or loaded machine a call waits for a core without
// using any of its budget, so the verdict "ran past its budget" is about the call, not
// the machine. A wall-clock backstop (wall_backstop_ms: ten times the budget plus
// 5 s) still stops a call that gets almost no CPU at all.
//
// A count hook looks at the deadline every kCheckEvery VM instructions (the CPU clock
// only when enough wall time has passed for it to matter: ThreadCpuDeadline) and
// raises an error past it, and on every instruction after that, so a pcall inside the
// call cannot swallow the interruption for long. LuaJIT calls no hooks inside
// JIT-compiled traces, so a state run under a budget must have its JIT off (its
// owner switches it off when it creates the state). The hook cannot reach into C, so
// the deadline is also published to the bindings (bindings/call_deadline.hpp): a long
// C function (lp_solve's solve) stops there by itself.
//
// One thread runs one budgeted call at a time; the hook finds it through a
// thread-local pointer, since a Lua hook gets no user data.
#include <lua.hpp>

#include <string>

#include "bindings/call_deadline.hpp"

namespace tandem {

// The wall time a call with a budget of cpu_ms of CPU may take before it is stopped
// however little CPU it got: room for a machine many times slower than usual.
inline double wall_backstop_ms(double cpu_ms) { return 10.0 * cpu_ms + 5000.0; }

class CallBudget {
public:
  static constexpr int kCheckEvery = 256;  // VM instructions between two looks at the clock

  // Arms L's budget for a call of at most cpu_ms of this thread's CPU time (and
  // wall_backstop_ms(cpu_ms) of wall time), from now until the object ends.
  // `interrupted` starts the error the call raises past it (kept by reference: it
  // must outlive the budget); the budget adds what it measured (detail()).
  CallBudget(lua_State* L, double cpu_ms, const std::string& interrupted);
  ~CallBudget();
  CallBudget(const CallBudget&) = delete;
  CallBudget& operator=(const CallBudget&) = delete;

  // Whether the call ran past its deadline (its failure is then the budget's).
  bool expired() const { return expired_; }
  // After an expiry: what was measured ("50.1 ms of CPU in 212 ms", or the backstop's
  // account).
  const std::string& detail() const { return detail_; }
  // The CPU time the thread has used since the budget was armed.
  double cpu_used_ms() const { return deadline_.cpu.used_ms(); }

private:
  static void hook(lua_State* L, lua_Debug*);
  void expire(CallDeadline::Passed why);

  lua_State* L_;
  double start_ms_;
  CallDeadline deadline_;
  const std::string& interrupted_;
  bool expired_ = false;
  std::string detail_, raised_;  // raised_: interrupted_ + ": " + detail_
  CallBudget* enclosing_;
  CallDeadlineScope published_;
};

}  // namespace tandem
