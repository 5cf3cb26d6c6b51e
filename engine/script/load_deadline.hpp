#pragma once
// Experiment and model files are the user's Lua, run when an experiment loads,
// before anything prints: a loop that never ends in one used to hang `tandem run`
// with no output at all. Both now run under a deadline, the CallBudget of a policy
// call (budget.hpp), of load_timeout_s() seconds of CPU time (with the budget's
// wall-clock backstop, ten times that plus 5 s), so a loaded machine does not fail
// a file that loads.
//
// The experiment file's chunk is called from C++ (LoadDeadline::call). The model
// file runs inside tandem.experiment.resolve(), between other checks, so the Lua
// side arms the deadline around it: package.loaded['tandem.load_deadline'] holds
// arm(what) and disarm(), which build_model() calls when the engine provides them
// (a resolve() run by a Lua test has no deadline). Past the deadline the hook
// raises an ordinary error from inside the looping code, so the traceback shows
// where it looped; C++ then reports it with what to do.
//
// A budget's hook is not called inside JIT-compiled traces, so the state's JIT is
// off (loading runs once, briefly: the interpreter is fast enough).
#include <memory>
#include <string>

#include "engine/script/budget.hpp"

struct lua_State;

namespace tandem {

// Seconds of CPU an experiment or model file may run while loading:
// TANDEM_LOAD_TIMEOUT_S when set to a positive number, else 10. Building a model is a table of layers: it
// takes milliseconds.
double load_timeout_s();

class LoadDeadline {
public:
  // Switches L's JIT off and registers tandem.load_deadline in L. Must be destroyed
  // before L is closed (declare it after the LuaState).
  explicit LoadDeadline(lua_State* L, double seconds = load_timeout_s());
  ~LoadDeadline();
  LoadDeadline(const LoadDeadline&) = delete;
  LoadDeadline& operator=(const LoadDeadline&) = delete;

  // protected_call under the deadline for the file `file` ("experiment file x.lua").
  void call(int nargs, int nresults, const std::string& file, const std::string& doing);
  // protected_call of code that may arm the deadline itself (resolve(), for the model).
  void call_arming(int nargs, int nresults, const std::string& doing);

private:
  static int arm(lua_State* L);
  static int disarm(lua_State* L);
  void start(const std::string& file);
  // Runs protected_call; past the deadline, throws the deadline's error instead of
  // the interruption's.
  void run(int nargs, int nresults, const std::string& doing);

  lua_State* L_;
  double seconds_;
  std::string file_, message_;  // what is running under the budget, and its error
  std::unique_ptr<CallBudget> budget_;
};

}  // namespace tandem
