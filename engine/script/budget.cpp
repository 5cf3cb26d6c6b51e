#include "engine/script/budget.hpp"

#include "engine/core/clock.hpp"

namespace tandem {

namespace {
thread_local CallBudget* t_budget = nullptr;
}  // namespace

CallBudget::CallBudget(lua_State* L, double budget_ms, const std::string& interrupted)
    : L_(L),
      deadline_ms_(now_ms() + budget_ms),
      interrupted_(interrupted),
      enclosing_(t_budget),
      published_(deadline_ms_) {
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

void CallBudget::hook(lua_State* L, lua_Debug*) {
  CallBudget* budget = t_budget;
  if (!budget || now_ms() <= budget->deadline_ms_) return;
  budget->expired_ = true;
  // From now on every instruction raises, so a call that pcalls its way around the
  // first error meets the next one at once.
  lua_sethook(L, hook, LUA_MASKCOUNT, 1);
  luaL_error(L, "%s", budget->interrupted_.c_str());
}

}  // namespace tandem
