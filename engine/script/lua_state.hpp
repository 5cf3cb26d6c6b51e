#pragma once
// The Lua host's ground rules, in one place (DESIGN.md, habit 5). C++ exceptions and
// Lua errors never cross each other:
//  - every call from C++ into Lua goes through protected_call(), which runs it under
//    lua_pcall with a traceback handler and turns a Lua error into a tandem::Error
//    (what was being done, the Lua message with its file:line, and the traceback);
//  - every C++ function Lua can call is wrapped by lua_guard, which catches C++
//    exceptions inside the function and raises the Lua error only after the catch
//    block has ended. It has no catch (...) and nothing on the way is noexcept:
//    LuaJIT on x64 unwinds its own errors as foreign exceptions, which a catch-all
//    would swallow and a noexcept frame would turn into std::terminate.
//
// Two kinds of Lua error values are understood:
//  - a string (error('...') or any runtime error): reported with the traceback;
//  - a "user error" table {message = string, hint = string?, where = string?}: a
//    mistake in the user's input (an unknown key in an experiment, say) that a
//    script has already located and explained. It is reported as is, without a
//    traceback, which would only show the validating library's internals.
#include <lua.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "engine/core/error.hpp"

namespace tandem {

// A Lua error as a tandem::Error. what() reads "<what was being done>: <file:line:
// message>", then the hint, then the Lua traceback (none for user errors); where()
// is the Lua location (file:line) when the message has one.
class LuaError : public Error {
public:
  // doing: what was being done ("running experiment x.lua"); lua_message: the Lua
  // error's text; traceback: "stack traceback:\n..." or empty.
  LuaError(const std::string& doing, std::string lua_message, std::string where, std::string hint,
           std::string traceback);
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& lua_message() const { return lua_message_; }
  const std::string& traceback() const { return traceback_; }

private:
  std::string lua_message_, traceback_, message_;
};

// Where the Lua library (scripts/), models (models/) and experiments live: the
// environment variable TANDEM_HOME if set, otherwise the source tree tandem was
// built from (TANDEM_SOURCE_DIR).
std::string tandem_root();

// Opens the standard libraries in L, sets package.path and package.tandem_root as
// LuaState does, registers the bindings (lpsolve), installs tandem's panic handler
// and switches the JIT off (every tandem state is interpreted). For states made with a custom allocator (policy_sandbox.cpp).
void open_tandem_libraries(lua_State* L);

// An owned Lua state with the standard libraries open, package.path set to
// <root>/scripts/?.lua;<root>/scripts/?/init.lua;<root>/?.lua (so scripts can
// `require 'tandem.nn'`), and package.tandem_root = <root> (so they can find
// models/ by name).
class LuaState {
public:
  LuaState();
  ~LuaState();
  LuaState(const LuaState&) = delete;
  LuaState& operator=(const LuaState&) = delete;
  LuaState(LuaState&& other) noexcept;
  LuaState& operator=(LuaState&& other) noexcept;

  lua_State* get() const { return L_; }
  operator lua_State*() const { return L_; }

private:
  lua_State* L_ = nullptr;
};

// Calls the function below its nargs arguments on the stack, like lua_pcall, with a
// traceback handler. On success the nresults results (or all, with LUA_MULTRET) are
// left on the stack. On error the function and its arguments are popped and a
// LuaError is thrown whose message says `what` was being done (e.g. "running
// experiment scripts/experiments/x.lua"), then the Lua error and its traceback.
void protected_call(lua_State* L, int nargs, int nresults, const std::string& what);

// Loads a Lua file as a chunk (luaL_loadfile; not run yet) and pushes it. A missing
// or unreadable file, or a syntax error (reported as file:line: message), throws a
// tandem::Error with a hint. `what` names the file's role, e.g. "experiment".
void load_file(lua_State* L, const std::string& path, const std::string& what = "Lua file");

// Pushes require(module) (under protected_call).
void require_module(lua_State* L, const char* module);
// Pushes require(module)[function], ready for protected_call.
void push_module_function(lua_State* L, const char* module, const char* function);

// Fields of the table on top of the stack, and a list of integers as a new table:
// what the engine's state tables for Lua (policy stats, console answers) are made of.
inline void set_number(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}
inline void set_string(lua_State* L, const char* key, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, key);
}
template <typename Int>
void push_int_array(lua_State* L, const std::vector<Int>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushnumber(L, static_cast<double>(v[i]));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

// The text of the value at idx for a message: strings and numbers as they are, a
// user error's message, otherwise "(a <type> value)". Never raises.
std::string lua_value_text(lua_State* L, int idx);

// An absolute stack index for idx (LuaJIT has no lua_absindex).
inline int abs_index(lua_State* L, int idx) {
  return idx > 0 || idx <= LUA_REGISTRYINDEX ? idx : lua_gettop(L) + idx + 1;
}

// Runs fn(L) and turns a std::exception it throws into a Lua error carrying the
// exception's message (copied out; the exception is gone before the error is
// raised). Inside fn, prefer throwing tandem::Error over raising Lua errors
// (luaL_check*, lua_error) while C++ objects with destructors are alive.
int call_guarded(lua_State* L, lua_CFunction fn);

// The form to register a plain C function: lua_pushcfunction(L, &lua_guard<my_fn>).
template <lua_CFunction F>
int lua_guard(lua_State* L) {
  return call_guarded(L, F);
}

// The form for a body written in place, inside a lua_CFunction:
//   int l_thing(lua_State* L) { return tandem::lua_guard(L, [&] { ...; return 1; }); }
template <typename Body>
int lua_guard(lua_State* L, Body&& body) {
  char message[4096];
  try {
    return body();
  } catch (const std::exception& e) {
    std::snprintf(message, sizeof message, "%s", e.what());
  }
  return luaL_error(L, "%s", message);  // outside the catch: no C++ handler is active
}

}  // namespace tandem
