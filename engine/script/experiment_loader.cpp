#include "engine/script/experiment_loader.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cmath>

#include "engine/core/error.hpp"
#include "engine/data/datasets.hpp"
#include "engine/dist/launcher.hpp"
#include "engine/nn/model.hpp"
#include "engine/script/experiment_fields.hpp"
#include "engine/script/load_deadline.hpp"
#include "engine/script/lua_state.hpp"

namespace tandem {

using nlohmann::json;

namespace {

constexpr int kMaxDepth = 64;

json to_json(lua_State* L, int idx, const std::string& path, int depth) {
  idx = abs_index(L, idx);
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return nullptr;
    case LUA_TBOOLEAN:
      return static_cast<bool>(lua_toboolean(L, idx));
    case LUA_TNUMBER: {
      const double v = lua_tonumber(L, idx);
      if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 9.2e18) return static_cast<int64_t>(v);
      return v;  // NaN and infinities become null
    }
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, idx, &n);
      return std::string(s, n);
    }
    case LUA_TTABLE:
      break;
    default:
      return std::string("(a ") + luaL_typename(L, idx) + ")";
  }
  TANDEM_CHECK_HINT(depth < kMaxDepth, "a table may not contain itself; keep tables under 64 levels deep",
                    "table '", path, "' is nested more than ", kMaxDepth, " levels deep (or contains itself)");
  TANDEM_CHECK(lua_checkstack(L, 4), "Lua stack overflow converting '", path, "' to JSON");

  // Keys exactly 1..n: an array.
  size_t count = 0;
  bool array_keys = true;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    ++count;
    if (lua_type(L, -2) != LUA_TNUMBER) {
      array_keys = false;
    } else {
      const double k = lua_tonumber(L, -2);
      if (k != std::floor(k) || k < 1) array_keys = false;
    }
    lua_pop(L, 1);
  }
  const size_t length = lua_objlen(L, idx);
  if (count > 0 && array_keys && length == count) {
    json out = json::array();
    for (size_t i = 1; i <= length; ++i) {
      lua_rawgeti(L, idx, static_cast<int>(i));
      out.push_back(to_json(L, -1, path + "[" + std::to_string(i) + "]", depth + 1));
      lua_pop(L, 1);
    }
    return out;
  }
  json out = json::object();
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    // Never lua_tostring the key itself: that would change it under lua_next.
    const std::string key = lua_value_text(L, -2);
    out[key] = to_json(L, -1, path + "." + key, depth + 1);
    lua_pop(L, 1);
  }
  return out;
}

}  // namespace

json lua_to_json(lua_State* L, int idx, const std::string& path) { return to_json(L, idx, path, 0); }

ExperimentConfig load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  // Under mpirun the per-worker settings must fit the ranks it started.
  const int world = mpi_world_size();
  json resolved;
  {
    LuaState L;
    LoadDeadline deadline(L);                                  // after L: gone before L closes
    // dofile and require search beside the experiment and TANDEM_PATH (scripts/tandem/search_path.lua).
    push_module_function(L, "tandem.search_path", "install");
    lua_pushstring(L, path.c_str());
    protected_call(L, 1, 0, "setting up the search path of experiment " + path);
    push_module_function(L, "tandem.experiment", "resolve");  // resolve
    load_file(L, path, "experiment");                          // resolve, chunk
    deadline.call(0, 1, "experiment file " + path, "running experiment " + path);  // resolve, experiment table
    lua_createtable(L, static_cast<int>(overrides.size()), 0);
    for (size_t i = 0; i < overrides.size(); ++i) {
      lua_pushstring(L, overrides[i].c_str());
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_pushstring(L, path.c_str());
    if (world > 0)
      lua_pushinteger(L, world);
    else
      lua_pushnil(L);
    deadline.call_arming(4, 1, "resolving experiment " + path);  // resolved table (the model under the deadline)
    TANDEM_CHECK(lua_istable(L, -1), "tandem.experiment.resolve returned a ", luaL_typename(L, -1),
                 ", not the resolved experiment table");
    resolved = lua_to_json(L, -1, "experiment");
  }
  if (resolved.contains("overrides") && resolved["overrides"].empty()) resolved["overrides"] = json::array();
  ExperimentConfig config = config_from_resolved(resolved);
  config.source = path;
  config.resolved_json = resolved.dump(2);

  // What can only be checked outside Lua, checked before any worker starts: the
  // data files, and that the model fits the data's samples, which the ranks would
  // otherwise find each on its own after mpirun has started them. Its layers are
  // built for that, its parameters not allocated (the memory check, memory_check.hpp,
  // comes after, where the command knows how many ranks will hold the model).
  check_dataset_files(config.data);
  if (!config.init_from.empty() && ::access(config.init_from.c_str(), R_OK) != 0)
    TANDEM_FAIL_HINT("point init_from at a .safetensors file (a run's params.safetensors, or Hugging Face's "
                     "model.safetensors)", "init_from: '", config.init_from, "' cannot be read: ",
                     std::strerror(errno));
  try {
    model_footprint(config.model);
  } catch (const Error& e) {
    TANDEM_FAIL_HINT("fix the model (" + resolved["model"].value("file", std::string("its file")) +
                         ") or its model_args, or the data's shape",
                     "the model of ", path, " does not fit the data's samples ", shape_str(config.model.input), ": ",
                     e.what());
  }
  return config;
}

}  // namespace tandem
