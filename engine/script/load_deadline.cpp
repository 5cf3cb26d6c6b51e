#include "engine/script/load_deadline.hpp"

#include <lua.hpp>
#include <luajit.h>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "engine/core/error.hpp"
#include "engine/script/lua_state.hpp"

namespace tandem {

namespace {
// The innermost Lua frame of a traceback ("loop_model.lua:4"): where the code was
// when the deadline came. The interruption's own message names the hook's caller.
std::string innermost_lua_frame(const std::string& traceback) {
  for (size_t at = traceback.find("\n\t"); at != std::string::npos; at = traceback.find("\n\t", at + 1)) {
    const size_t end = traceback.find(": in ", at);
    const std::string frame = traceback.substr(at + 2, end == std::string::npos ? end : end - at - 2);
    if (frame.rfind("[C]", 0) != 0 && frame.find('\n') == std::string::npos) return frame;
  }
  return "";
}
}  // namespace

double load_timeout_s() {
  const char* text = std::getenv("TANDEM_LOAD_TIMEOUT_S");
  if (text && *text) {
    char* end = nullptr;
    const double s = std::strtod(text, &end);
    if (*end == '\0' && std::isfinite(s) && s > 0) return s;
  }
  return 10.0;
}

LoadDeadline::LoadDeadline(lua_State* L, double seconds) : L_(L), seconds_(seconds) {
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_createtable(L, 0, 2);
  lua_pushlightuserdata(L, this);
  lua_pushcclosure(L, &lua_guard<arm>, 1);
  lua_setfield(L, -2, "arm");
  lua_pushlightuserdata(L, this);
  lua_pushcclosure(L, &lua_guard<disarm>, 1);
  lua_setfield(L, -2, "disarm");
  lua_setfield(L, -2, "tandem.load_deadline");
  lua_pop(L, 2);
}

LoadDeadline::~LoadDeadline() = default;

int LoadDeadline::arm(lua_State* L) {
  auto* self = static_cast<LoadDeadline*>(lua_touserdata(L, lua_upvalueindex(1)));
  const char* file = lua_tostring(L, 1);
  TANDEM_CHECK(file != nullptr, "tandem.load_deadline.arm(file) needs the file's name (a bug in experiment.lua)");
  self->start(file);
  return 0;
}

int LoadDeadline::disarm(lua_State* L) {
  static_cast<LoadDeadline*>(lua_touserdata(L, lua_upvalueindex(1)))->budget_.reset();
  return 0;
}

void LoadDeadline::start(const std::string& file) {
  budget_.reset();  // before its message changes: the budget holds it by reference
  file_ = file;
  message_ = fmt::format("{} did not finish loading within {:g} s", file, seconds_);
  budget_ = std::make_unique<CallBudget>(L_, seconds_ * 1000.0, message_);
}

void LoadDeadline::call(int nargs, int nresults, const std::string& file, const std::string& doing) {
  start(file);
  run(nargs, nresults, doing);
}

void LoadDeadline::call_arming(int nargs, int nresults, const std::string& doing) { run(nargs, nresults, doing); }

void LoadDeadline::run(int nargs, int nresults, const std::string& doing) {
  try {
    protected_call(L_, nargs, nresults, doing);
  } catch (const LuaError& e) {
    const bool expired = budget_ && budget_->expired();
    const std::string measured = expired ? budget_->detail() : "";
    budget_.reset();
    if (!expired) throw;
    const std::string at = innermost_lua_frame(e.traceback());
    throw LuaError(doing, (at.empty() ? message_ : message_ + " (it was at " + at + ")") + ": " + measured, at,
                   fmt::format("look for a loop that never ends in {} (the traceback below shows where it was); "
                               "building an experiment table or a model's layers takes milliseconds. If it "
                               "really needs longer, set TANDEM_LOAD_TIMEOUT_S=SECONDS of CPU (now {:g})",
                               file_, seconds_),
                   e.traceback());
  }
  budget_.reset();
}

}  // namespace tandem
