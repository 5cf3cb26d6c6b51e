// The lpsolve binding seen from C++ (bindings/lpsolve.cpp): every LuaState can require
// it, its argument errors come back through protected_call as a LuaError that names the
// call and the script line, a memory cap met while building a model is a Lua error (not
// a crash), and models in separate states solve on separate threads at once (the policy
// host solves on its own thread). The Lua API itself is tested in tests/lua/test_lpsolve.lua.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bindings/lpsolve.hpp"
#include "engine/script/lua_state.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_lpsolve_binding)  // ctest's unit.test_lpsolve_binding (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

// Runs `code` as a chunk named "=snippet" and leaves its one result on the stack.
void run(lua_State* L, const std::string& code) {
  if (luaL_loadbuffer(L, code.data(), code.size(), "=snippet") != 0) {
    std::string message = lua_tostring(L, -1);
    lua_pop(L, 1);
    BOOST_FAIL("syntax error: " << message);
  }
  protected_call(L, 0, 1, "running a snippet");
}

// max 3x + 2y  s.t.  x + y <= 4, x + 3y <= 6, x <= 3: 11 at (3, 1).
const char* const kSmallLp = R"(
  local lp = require 'lpsolve'
  local m = lp.model()
  local x, y = m:var { hi = 3 }, m:var()
  m:constraint({ x, y }, { 1, 1 }, '<=', 4)
  m:constraint({ x, y }, { 1, 3 }, '<=', 6)
  m:objective({ x, y }, { 3, 2 }, 'max')
  local r = m:solve()
  m:free()
  return r.status == 'optimal' and r.objective or -1
)";

}  // namespace

BOOST_AUTO_TEST_CASE(every_lua_state_can_require_lpsolve) {
  LuaState L;
  run(L, kSmallLp);
  BOOST_TEST(lua_tonumber(L, -1) == 11.0);
  lua_pop(L, 1);
  // open_lpsolve again (a second registration) is harmless.
  open_lpsolve(L);
  run(L, "return package.preload.lpsolve ~= nil and require('lpsolve').inf");
  BOOST_TEST(lua_tonumber(L, -1) == 1e30);
}

BOOST_AUTO_TEST_CASE(argument_errors_come_back_as_lua_errors_naming_the_line) {
  LuaState L;
  const std::string message = error_of(
      [&] { run(L, "local m = require('lpsolve').model()\nlocal x = m:var()\nm:constraint({ x }, { 1 }, '<', 3)\n"); });
  CHECK_CONTAINS(message, "snippet:3:");
  CHECK_CONTAINS(message, "lpsolve model:constraint: argument 3 (op) must be '<=', '>=' or '==', got '<'");
  // The state is still usable afterwards.
  run(L, kSmallLp);
  BOOST_TEST(lua_tonumber(L, -1) == 11.0);
}

namespace {

struct CappedAllocator {
  size_t used = 0, cap = 0;
  static void* alloc(void* ud, void* ptr, size_t old_size, size_t new_size) {
    auto* a = static_cast<CappedAllocator*>(ud);
    if (new_size == 0) {
      std::free(ptr);
      a->used -= old_size;
      return nullptr;
    }
    if (new_size > old_size && a->used + (new_size - old_size) > a->cap) return nullptr;
    void* p = std::realloc(ptr, new_size);
    if (p != nullptr) a->used = a->used - old_size + new_size;
    return p;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_memory_cap_met_while_building_models_is_a_lua_error) {
  CappedAllocator a;
  a.cap = 64u << 20;
  lua_State* L = lua_newstate(&CappedAllocator::alloc, &a);
  BOOST_REQUIRE(L != nullptr);
  open_tandem_libraries(L);
  run(L, "require 'lpsolve'; return true");
  lua_pop(L, 1);
  a.cap = a.used + (256u << 10);  // a little room: models, rows and results until it runs out
  const std::string message = error_of([&] {
    run(L, R"(
      local lp = require 'lpsolve'
      local keep = {}
      for i = 1, 1e7 do
        local m = lp.model()
        local x = m:var { hi = i }
        m:constraint({ x, x, x }, { 1, 2, 3 }, '<=', i)
        m:objective({ x }, { 1 }, 'max')
        keep[#keep + 1] = { m, m:solve() }
      end
    )");
  });
  CHECK_CONTAINS(message, "not enough memory");
  a.cap = size_t(1) << 40;
  lua_close(L);  // __gc releases every model built before the cap was met
  BOOST_TEST(a.used == 0u);
}

BOOST_AUTO_TEST_CASE(states_on_separate_threads_solve_at_once) {
  // Each thread: a 32-worker min-max LP and a small knapsack MILP, many times over.
  const std::string code = R"(
    local lp = require 'lpsolve'
    local total = 0
    for rep = 1, 150 do
      local m = lp.model()
      local t = m:var()
      local cols, ones = {}, {}
      for i = 1, 32 do cols[i], ones[i] = m:var { hi = 40 }, 1 end
      m:constraint(cols, ones, '==', 500)
      for i = 1, 32 do m:constraint({ cols[i], t }, { 1 + (i % 5) * 0.25, -1 }, '<=', -(i % 3)) end
      m:objective({ t }, { 1 })
      local r = m:solve()
      if r.status ~= 'optimal' then error('lp: ' .. r.message) end
      total = total + r.objective
      local k = lp.model()
      local items = {}
      for i = 1, 3 do items[i] = k:var { hi = 1, int = true } end
      k:constraint(items, { 5, 4, 3 }, '<=', 7)
      k:objective(items, { 10, 7.5, 5.5 }, 'max')
      local s = k:solve()
      if s.status ~= 'optimal' or math.abs(s.objective - 13) > 1e-9 then error('milp: ' .. s.message) end
    end
    return total
  )";
  LuaState reference;
  run(reference, code);
  const double want = lua_tonumber(reference, -1);

  constexpr int kThreads = 4;
  std::vector<double> got(kThreads, -1);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        LuaState L;
        run(L, code);
        got[static_cast<size_t>(i)] = lua_tonumber(L, -1);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    BOOST_TEST(errors[static_cast<size_t>(i)] == "");
    BOOST_TEST(got[static_cast<size_t>(i)] == want);
  }
}

BOOST_AUTO_TEST_SUITE_END()  // test_lpsolve_binding
