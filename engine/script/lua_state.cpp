#include "engine/script/lua_state.hpp"

#include "bindings/lpsolve.hpp"
#include "engine/core/build_paths.hpp"

#include <luajit.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

namespace tandem {

namespace {

// The location a Lua message starts with ("path/to/file.lua:12: ..."), or "".
std::string leading_location(const std::string& msg) {
  for (size_t i = msg.find(':'); i != std::string::npos; i = msg.find(':', i + 1)) {
    size_t j = i + 1;
    while (j < msg.size() && std::isdigit(static_cast<unsigned char>(msg[j]))) ++j;
    if (j > i + 1 && j < msg.size() && msg[j] == ':') return msg.substr(0, j);
    if (msg.compare(i, 2, ": ") == 0) break;  // past the location part
  }
  return "";
}

std::string format_lua_error(const std::string& what, const std::string& hint, const std::string& traceback) {
  std::string s = what;
  if (!hint.empty()) s += "\n  what to do: " + hint;
  if (!traceback.empty()) s += "\n" + traceback;
  return s;
}

// Raw field access: never runs metamethods, so it cannot raise.
std::string raw_string_field(lua_State* L, int idx, const char* key) {
  idx = abs_index(L, idx);
  lua_pushstring(L, key);
  lua_rawget(L, idx);
  std::string s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
  lua_pop(L, 1);
  return s;
}

bool is_user_error(lua_State* L, int idx) {
  if (!lua_istable(L, idx)) return false;
  idx = abs_index(L, idx);
  lua_pushstring(L, "message");
  lua_rawget(L, idx);
  const bool yes = lua_type(L, -1) == LUA_TSTRING;
  lua_pop(L, 1);
  return yes;
}

// The message handler of every protected call: appends the traceback to a string
// error; passes user errors through untouched (they carry their own location).
int traceback_handler(lua_State* L) {
  if (is_user_error(L, 1)) return 1;
  const char* msg = lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER ? lua_tostring(L, 1) : nullptr;
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);
    else
      msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int panic_handler(lua_State* L) {
  std::fprintf(stderr, "tandem: unprotected Lua error (a bug in tandem, please report it): %s\n",
               lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(no message)");
  std::fflush(stderr);
  std::abort();
}

std::string doing_and_message(const std::string& doing, const std::string& lua_message, const std::string& where) {
  std::string s = doing + ": " + lua_message;
  if (!where.empty() && s.find(where) == std::string::npos) s += " (at " + where + ")";
  return s;
}

}  // namespace

LuaError::LuaError(const std::string& doing, std::string lua_message, std::string where, std::string hint,
                   std::string traceback)
    : Error(doing_and_message(doing, lua_message, where), std::move(where), std::move(hint)),
      lua_message_(std::move(lua_message)),
      traceback_(std::move(traceback)) {
  message_ = format_lua_error(what_failed(), this->hint(), traceback_);
}

std::string tandem_root() {
  std::string root;
  if (const char* home = std::getenv("TANDEM_HOME"); home && *home)
    root = home;
  else
    root = configured_source_dir();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

void open_tandem_libraries(lua_State* L) {
  lua_atpanic(L, panic_handler);
  luaL_openlibs(L);
  // Every tandem state is interpreted (after luaL_openlibs: opening the jit library
  // switches the JIT on): the call budgets' and load deadlines' count hooks are never
  // called inside a JIT trace, and with the JIT on this LuaJIT (Debian's 2.1.0~beta3
  // 2022-03-20 snapshot) now and then broke a table in lua.test_experiment_fuzz (about
  // 1 run in 25: an experiment that lost its keys).
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  const std::string root = tandem_root();
  const std::string path = root + "/scripts/?.lua;" + root + "/scripts/?/init.lua;" + root + "/?.lua";
  lua_getglobal(L, "package");
  lua_pushstring(L, path.c_str());
  lua_setfield(L, -2, "path");
  lua_pushstring(L, root.c_str());
  lua_setfield(L, -2, "tandem_root");
  lua_pop(L, 1);
  open_lpsolve(L);
}

LuaState::LuaState() {
  L_ = luaL_newstate();
  TANDEM_CHECK_HINT(L_ != nullptr, "free some memory and retry", "could not create a Lua state (out of memory)");
  open_tandem_libraries(L_);
}

LuaState::~LuaState() {
  if (L_) lua_close(L_);
}

LuaState::LuaState(LuaState&& other) noexcept : L_(std::exchange(other.L_, nullptr)) {}

LuaState& LuaState::operator=(LuaState&& other) noexcept {
  if (this != &other) {
    if (L_) lua_close(L_);
    L_ = std::exchange(other.L_, nullptr);
  }
  return *this;
}

std::string lua_value_text(lua_State* L, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING:
      return lua_tostring(L, idx);
    case LUA_TNUMBER: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.14g", lua_tonumber(L, idx));
      return buf;
    }
    case LUA_TBOOLEAN:
      return lua_toboolean(L, idx) ? "true" : "false";
    case LUA_TNIL:
      return "nil";
    default:
      if (is_user_error(L, idx)) return raw_string_field(L, idx, "message");
      return std::string("(a ") + luaL_typename(L, idx) + " value)";
  }
}

void protected_call(lua_State* L, int nargs, int nresults, const std::string& what) {
  const int fn_index = lua_gettop(L) - nargs;
  TANDEM_CHECK(fn_index >= 1 && lua_isfunction(L, fn_index), "protected_call(", what,
               ") needs a function below its ", nargs, " arguments on the Lua stack");
  TANDEM_CHECK(lua_checkstack(L, 2), "Lua stack overflow before ", what);
  lua_pushcfunction(L, traceback_handler);
  lua_insert(L, fn_index);
  const int status = lua_pcall(L, nargs, nresults, fn_index);
  if (status == 0) {
    lua_remove(L, fn_index);
    return;
  }
  // Copy everything out of the Lua stack before anything is thrown.
  std::string message, hint, where, traceback;
  const bool user = is_user_error(L, -1);
  if (user) {
    message = raw_string_field(L, -1, "message");
    hint = raw_string_field(L, -1, "hint");
    where = raw_string_field(L, -1, "where");
  } else {
    std::string text = lua_value_text(L, -1);
    const size_t tb = text.find("\nstack traceback:");
    if (tb != std::string::npos) {
      traceback = text.substr(tb + 1);
      text.resize(tb);
    }
    message = std::move(text);
    where = leading_location(message);
  }
  lua_settop(L, fn_index - 1);

  if (status == LUA_ERRMEM) {
    hint = "the script allocates more than the machine allows: look for a runaway loop or table";
  } else if (status == LUA_ERRERR) {
    hint = "the error handler itself failed; the error object may have a broken __tostring";
  } else if (hint.empty() && !user) {
    hint = where.empty() ? "see the traceback for where the error was raised"
                         : "fix the Lua error at " + where + " (the traceback shows how it was reached)";
  }
  throw LuaError(what, message, where, hint, traceback);
}

void load_file(lua_State* L, const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec))
    TANDEM_FAIL_HINT("check the path (relative paths start from the working directory, " +
                         fs::current_path(ec).string() + ")",
                     what, " file '", path, "' does not exist");
  if (fs::is_directory(path, ec))
    TANDEM_FAIL_HINT("give the path of a .lua file", what, " path '", path, "' is a directory, not a file");
  const int status = luaL_loadfile(L, path.c_str());
  if (status == 0) return;
  const std::string msg = lua_value_text(L, -1);
  lua_pop(L, 1);
  if (status == LUA_ERRSYNTAX) {
    const std::string where = leading_location(msg);
    const std::string at = where.empty() ? path : where;
    throw LuaError("syntax error in " + what + " " + path, msg, at,
                   "fix the syntax at " + at + "; a missing comma, `end` or closing bracket is often reported on a later line",
                   "");
  }
  TANDEM_FAIL_HINT("check that the file is readable", "could not read ", what, " file '", path, "': ", msg);
}

void require_module(lua_State* L, const char* module) {
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  protected_call(L, 1, 1, std::string("loading Lua module '") + module + "'");
}

void push_module_function(lua_State* L, const char* module, const char* function) {
  require_module(L, module);
  const bool is_table = lua_istable(L, -1);
  if (is_table) {
    lua_pushstring(L, function);
    lua_rawget(L, -2);
    lua_remove(L, -2);
  }
  if (!is_table || !lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    std::string file = module;
    for (char& c : file)
      if (c == '.') c = '/';
    TANDEM_FAIL_HINT("check scripts/" + file + ".lua (under " + tandem_root() +
                         ", or set TANDEM_HOME to the folder holding scripts/)",
                     "Lua module '", module, "' has no function '", function, "'");
  }
}

int call_guarded(lua_State* L, lua_CFunction fn) {
  char message[4096];
  bool failed = false;
  int results = 0;
  try {
    results = fn(L);
  } catch (const std::exception& e) {
    std::snprintf(message, sizeof message, "%s", e.what());
    failed = true;
  }
  // No catch (...): LuaJIT may unwind its own errors as foreign exceptions, and those
  // must pass through untouched.
  if (failed) return luaL_error(L, "%s", message);
  return results;
}

}  // namespace tandem
