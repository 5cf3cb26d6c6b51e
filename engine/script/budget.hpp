#pragma once
// The time budget of one Lua call, the same for a policy's calls (policy_sandbox.hpp)
// and a console command (repl.hpp): DESIGN.md habit 7, budgets stop runaway calls
// early.
//
// A count hook looks at a wall-clock deadline every kCheckEvery VM instructions and
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

class CallBudget {
public:
  static constexpr int kCheckEvery = 256;  // VM instructions between two looks at the clock

  // Arms L's budget for a call of at most budget_ms, from now until the object ends.
  // `interrupted` is the error the call raises past it (kept by reference: it must
  // outlive the budget).
  CallBudget(lua_State* L, double budget_ms, const std::string& interrupted);
  ~CallBudget();
  CallBudget(const CallBudget&) = delete;
  CallBudget& operator=(const CallBudget&) = delete;

  // Whether the call ran past its deadline (its failure is then the budget's).
  bool expired() const { return expired_; }

private:
  static void hook(lua_State* L, lua_Debug*);

  lua_State* L_;
  double deadline_ms_;
  const std::string& interrupted_;
  bool expired_ = false;
  CallBudget* enclosing_;
  CallDeadlineScope published_;
};

}  // namespace tandem
