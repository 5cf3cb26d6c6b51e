#pragma once
// The environment untrusted Lua runs in (policies, console commands): the standard
// libraries reduced in place to the list in scripts/tandem/whitelist.lua (docs/policies.md
// documents it), with the JIT off. Run once on a fresh state, before any user code.
#include <lua.hpp>

namespace tandem {

// Opens tandem's libraries in L (open_tandem_libraries), switches the JIT off and
// applies the whitelist. Raises a Lua error on failure: call it protected.
int open_whitelisted_libraries(lua_State* L);

}  // namespace tandem
