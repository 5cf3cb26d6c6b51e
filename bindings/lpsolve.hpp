#pragma once
// The `lpsolve` Lua module: a general MILP builder over Debian's lp_solve 5.5, so the
// min-max batch allocation itself is written in Lua (scripts/tandem/minmax.lua).
#include <lua.hpp>

namespace tandem {

// Registers package.preload.lpsolve in L, so Lua code can `require 'lpsolve'`.
void open_lpsolve(lua_State* L);

}  // namespace tandem
