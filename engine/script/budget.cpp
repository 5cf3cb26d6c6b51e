#include "engine/script/budget.hpp"

#include <cstdio>

#include "engine/core/clock.hpp"

namespace tandem {

namespace {
thread_local CallBudget* t_budget = nullptr;
}  // namespace

CallBudget::CallBudget(lua_State* L, double cpu_ms, const std::string& interrupted)
    : L_(L),
      start_ms_(now_ms()),
      deadline_{ThreadCpuDeadline(cpu_ms), start_ms_ + wall_backstop_ms(cpu_ms)},
      interrupted_(interrupted),
      enclosing_(t_budget),
      published_(&deadline_) {
  t_budget = this;
  lua_sethook(L_, hook, LUA_MASKCOUNT, kCheckEvery);
}

CallBudget::~CallBudget() {
  t_budget = enclosing_;
  // Re-armed at the normal pace after an expiry left it raising on every instruction.
  if (enclosing_)
    lua_sethook(L_, hook, LUA_MASKCOUNT, kCheckEvery);
  else
    lua_sethook(L_, nullptr, 0, 0);
}

void CallBudget::expire(CallDeadline::Passed why) {
  expired_ = true;
  const double cpu = deadline_.cpu.used_ms(), wall = now_ms() - start_ms_;
  char text[256];
  if (why == CallDeadline::cpu_time)
    std::snprintf(text, sizeof text, "%.1f ms of CPU in %.0f ms", cpu, wall);
  else
    std::snprintf(text, sizeof text,
                  "only %.1f ms of CPU in %.0f ms, its wall-clock backstop (%.0f ms: 10 x the budget + 5 s): the "
                  "machine is overloaded, or the process was stopped",
                  cpu, wall, deadline_.wall_ms - start_ms_);
  detail_ = text;
  raised_ = interrupted_ + ": " + detail_;
}

void CallBudget::hook(lua_State* L, lua_Debug*) {
  CallBudget* budget = t_budget;
  if (!budget) return;
  if (!budget->expired_) {
    const CallDeadline::Passed why = budget->deadline_.check();
    if (why == CallDeadline::none) return;
    budget->expire(why);
    // From now on every instruction raises, so a call that pcalls its way around the
    // first error meets the next one at once.
    lua_sethook(L, hook, LUA_MASKCOUNT, 1);
  }
  luaL_error(L, "%s", budget->raised_.c_str());
}

}  // namespace tandem
