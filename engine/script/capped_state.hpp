#pragma once
// A Lua state for untrusted code (policies and console commands, DESIGN.md habits 6
// and 7): the whitelisted environment (lua_whitelist.hpp), a memory cap, the JIT off,
// and calls that run under a time budget (budget.hpp) and say why they failed.
//  - memory: the state's allocator refuses to grow past the cap; Lua reports "not
//    enough memory" in the call that asked, which fails like any error. The cap
//    holds inside call(); the host's own few pushes around a call run uncapped,
//    where a refusal would be an unprotected error;
//  - time: a budget of CPU time with a wall-clock backstop (budget.hpp). LuaJIT calls no hooks inside JIT-compiled traces, so the JIT is off and
//    the whitelist keeps jit, debug.sethook and ffi out of reach.
// What neither can stop (a C function that never returns, a crash of the VM on
// crafted input) is the policy worker process's job (policy_process.hpp).
//
// Not thread-safe: one thread at a time calls a state.
#include <lua.hpp>

#include <exception>
#include <memory>
#include <string>

namespace tandem {

// Why a call of user code failed: the Lua error (with its traceback), and whether a
// budget stopped it. Crash and Hung come from the policy worker process only.
class ScriptFailure : public std::exception {
public:
  enum Kind { Error, Timeout, Memory, Garbage, Crash, Hung };
  ScriptFailure(Kind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  Kind kind() const { return kind_; }
  const char* kind_name() const;
  static const char* kind_name(Kind kind);

private:
  Kind kind_;
  std::string message_;
};

class CappedState {
public:
  // A fresh state with the whitelist applied, capped at memory_mb. `owner` names the
  // code for messages ("policy x.lua", "the console"). Throws ScriptFailure (Memory)
  // when even the set-up does not fit.
  CappedState(double memory_mb, const std::string& owner);
  ~CappedState();
  CappedState(const CappedState&) = delete;
  CappedState& operator=(const CappedState&) = delete;

  lua_State* get() const { return L_; }
  // Runs the function below its nargs arguments under the cap and a budget of
  // budget_ms of CPU (budget.hpp), like protected_call; a failure throws ScriptFailure
  // with its kind (Timeout: the budget; Memory: the cap; else Error) and the Lua
  // traceback. budget_source names where the budget comes from, for the message.
  void call(int nargs, int nresults, const std::string& what, double budget_ms,
            const char* budget_source = "policy.budget_ms");
  double last_call_ms() const { return last_call_ms_; }          // wall time
  double last_call_cpu_ms() const { return last_call_cpu_ms_; }  // CPU time (the budget's)
  double memory_mb() const;  // what the state holds now
  double cap_mb() const { return cap_mb_; }

private:
  struct Allocator;
  void collect_if_crowded();
  std::unique_ptr<Allocator> alloc_;
  lua_State* L_ = nullptr;
  double cap_mb_;
  std::string owner_;
  double last_call_ms_ = 0.0, last_call_cpu_ms_ = 0.0;
};

}  // namespace tandem
