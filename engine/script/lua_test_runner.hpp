#pragma once
// Runs a Lua test file (tests/lua/test_*.lua): `tandem test FILE.lua`. The file
// registers tests with scripts/tandem/testing.lua and returns the harness (see the
// top of that file); a file may instead return a plain table of named test
// functions, run in name order.
#include <string>

namespace tandem {

// Runs every test of the file, each from C++ through protected_call, printing
// "ok NAME" or "FAIL NAME: error + traceback" to stdout and then "N passed, M failed".
// Returns the process exit code: 0 when every test passed, 1 when one failed, the
// file could not be loaded, or it holds no test.
int run_lua_test_file(const std::string& path);

}  // namespace tandem
