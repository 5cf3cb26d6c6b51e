// Placeholder: the lpsolve module is being written (see lpsolve.hpp).
#include "bindings/lpsolve.hpp"

namespace tandem {
void open_lpsolve(lua_State*) {}
}  // namespace tandem
