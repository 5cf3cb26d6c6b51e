#include "engine/script/lua_test_runner.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/script/lua_state.hpp"

namespace tandem {

namespace {

void print_line(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// Leaves a Lua array of the test functions on the stack and returns their names, in
// run order. `result` is what the file returned, `harness` the tandem.testing module.
std::vector<std::string> collect_tests(lua_State* L, int result, int harness, const std::string& path) {
  std::vector<std::string> names;
  lua_newtable(L);
  const int list = lua_gettop(L);
  auto add = [&](const std::string& name) {  // the function is on top of the stack
    names.push_back(name);
    lua_rawseti(L, list, static_cast<int>(names.size()));
  };

  bool registered = lua_isnil(L, result) || lua_rawequal(L, result, harness);
  if (!registered && lua_istable(L, result)) {
    lua_pushstring(L, "tests");
    lua_rawget(L, result);
    registered = lua_istable(L, -1);
    lua_pop(L, 1);
  }
  if (registered) {
    const int suite = lua_isnil(L, result) ? harness : result;
    lua_pushstring(L, "tests");
    lua_rawget(L, suite);
    const int tests = lua_gettop(L);
    TANDEM_CHECK_HINT(lua_istable(L, tests), "register tests with T.test(name, fn) and `return T`", "Lua test file ",
                      path, " has no list of tests");
    const int n = static_cast<int>(lua_objlen(L, tests));
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L, tests, i);
      lua_pushstring(L, "name");
      lua_rawget(L, -2);
      const std::string name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "#" + std::to_string(i);
      lua_pop(L, 1);
      lua_pushstring(L, "fn");
      lua_rawget(L, -2);
      TANDEM_CHECK_HINT(lua_isfunction(L, -1), "register tests with T.test(name, fn)", "test '", name, "' in ", path,
                        " has no function");
      lua_remove(L, -2);
      add(name);
    }
    lua_pop(L, 1);  // tests
    return names;
  }

  TANDEM_CHECK_HINT(lua_istable(L, result), "end the test file with `return T` (see scripts/tandem/testing.lua)",
                    "Lua test file ", path, " returned a ", luaL_typename(L, result), ", not its tests");
  std::vector<std::string> keys;
  lua_pushnil(L);
  while (lua_next(L, result) != 0) {
    const std::string key = lua_value_text(L, -2);
    const bool ok = lua_type(L, -2) == LUA_TSTRING && lua_isfunction(L, -1);
    lua_pop(L, 1);
    TANDEM_CHECK_HINT(ok, "return a table of named test functions, or use T.test (scripts/tandem/testing.lua)",
                      "entry '", key, "' of the table ", path, " returned is not a named test function");
    keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& k : keys) {
    lua_pushstring(L, k.c_str());
    lua_rawget(L, result);
    add(k);
  }
  return names;
}

}  // namespace

int run_lua_test_file(const std::string& path) {
  int passed = 0, failed = 0;
  try {
    LuaState L;
    require_module(L, "tandem.testing");
    const int harness = lua_gettop(L);
    load_file(L, path, "Lua test");
    protected_call(L, 0, 1, "loading Lua tests " + path);
    const int result = lua_gettop(L);
    const std::vector<std::string> names = collect_tests(L, result, harness, path);
    const int list = lua_gettop(L);
    for (size_t i = 0; i < names.size(); ++i) {
      lua_rawgeti(L, list, static_cast<int>(i + 1));
      try {
        protected_call(L, 0, 0, "test '" + names[i] + "'");
        ++passed;
        print_line("ok " + names[i]);
      } catch (const LuaError& e) {
        ++failed;
        std::string text = "FAIL " + names[i] + ": " + e.lua_message();
        if (!e.traceback().empty()) text += "\n" + e.traceback();
        print_line(text);
      } catch (const Error& e) {
        ++failed;
        print_line("FAIL " + names[i] + ": " + e.what());
      }
    }
    if (names.empty()) {
      ++failed;
      print_line("FAIL " + path + ": no tests (register them with T.test(name, fn) and `return T`)");
    }
  } catch (const Error& e) {
    ++failed;
    print_line("FAIL " + path + ": " + e.what());
  }
  print_line(std::to_string(passed) + " passed, " + std::to_string(failed) + " failed");
  return failed == 0 ? 0 : 1;
}

}  // namespace tandem
