#include "engine/script/policy_sandbox.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/core/clock.hpp"
#include "engine/script/lua_state.hpp"
#include "engine/train/worker_stats_fields.hpp"

namespace tandem {

namespace {

// Pushes a JSON value (cluster.params) as Lua values.
void push_json(lua_State* L, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      lua_createtable(L, 0, static_cast<int>(j.size()));
      for (auto it = j.begin(); it != j.end(); ++it) {
        push_json(L, it.value());
        lua_setfield(L, -2, it.key().c_str());
      }
      break;
    case nlohmann::json::value_t::array: {
      lua_createtable(L, static_cast<int>(j.size()), 0);
      int i = 0;
      for (const auto& v : j) {
        push_json(L, v);
        lua_rawseti(L, -2, ++i);
      }
      break;
    }
    case nlohmann::json::value_t::string:
      lua_pushstring(L, j.get_ref<const std::string&>().c_str());
      break;
    case nlohmann::json::value_t::boolean:
      lua_pushboolean(L, j.get<bool>());
      break;
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      lua_pushnil(L);
      break;
    default:
      lua_pushnumber(L, j.get<double>());
  }
}

struct ClusterArgs {
  const PolicyCluster* cluster;
};

constexpr const char* kParamsRaw = "tandem.params_raw";    // registry: cluster.params as given
constexpr const char* kParamsRead = "tandem.params_read";  // registry: the keys init() read

// cluster.params's __index: records the key, returns the raw value.
int params_index(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_pushboolean(L, 1);
  lua_rawset(L, lua_upvalueindex(2));
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  return 1;
}

// After init(): the string keys of cluster.params it never read (a typo such as
// params.tresh would otherwise be ignored in silence), and the ones it did read, as
// two comma-separated strings.
int params_unread(lua_State* L) {
  std::string unread, read;
  lua_getfield(L, LUA_REGISTRYINDEX, kParamsRaw);
  lua_getfield(L, LUA_REGISTRYINDEX, kParamsRead);
  if (!lua_istable(L, -1) || !lua_istable(L, -2)) return 0;
  lua_pushnil(L);
  while (lua_next(L, -3)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    lua_pushvalue(L, -1);
    lua_rawget(L, -3);
    const bool was_read = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (!was_read) unread += (unread.empty() ? "" : ", ") + std::string(lua_tostring(L, -1));
  }
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) read += (read.empty() ? "" : ", ") + std::string(lua_tostring(L, -1));
  }
  lua_pushstring(L, unread.c_str());
  lua_pushstring(L, read.c_str());
  return 2;
}

// A default as policy() shows it: numbers, booleans and short strings as Lua writes
// them; anything else by its type (the policy's own process made it: untrusted).
std::string shown_default(lua_State* L, int index) {
  switch (lua_type(L, index)) {
    case LUA_TNONE:
    case LUA_TNIL: return "none";
    case LUA_TBOOLEAN: return lua_toboolean(L, index) ? "true" : "false";
    case LUA_TNUMBER: {
      char s[32];
      std::snprintf(s, sizeof s, "%.14g", lua_tonumber(L, index));
      return s;
    }
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, index, &n);
      return "'" + std::string(s, std::min<size_t>(n, 80)) + (n > 80 ? "...'" : "'");
    }
    default: return std::string("(a ") + lua_typename(L, lua_type(L, index)) + ")";
  }
}

// After init(): the parameters it read, one a line, sorted by the host: "name" for
// one policy.params gives, "name<TAB>default" for one that took its default (from
// tandem.policy_util's defaults_taken; "unknown" when the policy read it without
// it).
int list_params_in_force(lua_State* L) {
  return lua_guard(L, [&] {
    lua_getfield(L, LUA_REGISTRYINDEX, kParamsRaw);   // 1
    lua_getfield(L, LUA_REGISTRYINDEX, kParamsRead);  // 2
    // The module as the policy's require gives it (the whitelist's require keeps
    // its own table of loaded modules); this runs in the policy's process, under
    // its budget, so a policy that replaced require only misreports its defaults.
    lua_getglobal(L, "require");                      // 3
    lua_pushnil(L);                                   // 4: defaults_taken
    if (lua_isfunction(L, 3)) {
      lua_pushvalue(L, 3);
      lua_pushliteral(L, "tandem.policy_util");
      lua_call(L, 1, 1);
      if (lua_istable(L, -1)) {
        lua_pushliteral(L, "defaults_taken");
        lua_rawget(L, -2);
        lua_replace(L, 4);
      }
      lua_settop(L, 4);
    }
    std::string out;
    if (lua_istable(L, 1) && lua_istable(L, 2)) {
      lua_pushnil(L);
      while (lua_next(L, 2) && out.size() < 64 * 1024) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) continue;
        const std::string key = lua_tostring(L, -1);
        lua_pushvalue(L, -1);
        lua_rawget(L, 1);
        const bool given = !lua_isnil(L, -1);
        lua_pop(L, 1);
        out += key.substr(0, 64);
        if (!given) {
          std::string shown = "unknown";
          if (lua_istable(L, 4)) {
            lua_pushvalue(L, -1);
            lua_rawget(L, 4);
            if (lua_istable(L, -1)) {
              lua_rawgeti(L, -1, 1);
              shown = shown_default(L, -1);
              lua_pop(L, 1);
            }
            lua_pop(L, 1);
          }
          out += "\t" + shown;
        }
        out += "\n";
      }
    }
    lua_pushlstring(L, out.data(), out.size());
    return 1;
  });
}

// Builds cluster (the only argument of init); run as a protected C function, since
// every allocation may meet the memory cap.
int build_cluster(lua_State* L) {
  const PolicyCluster& c = *static_cast<ClusterArgs*>(lua_touserdata(L, 1))->cluster;
  lua_createtable(L, 0, 8);
  set_number(L, "workers", c.workers);
  set_number(L, "global_batch", static_cast<double>(c.global_batch));
  set_number(L, "global_batch_min", static_cast<double>(c.batch_min()));
  set_number(L, "global_batch_max", static_cast<double>(c.batch_max()));
  lua_pushlstring(L, c.lr_scaling.data(), c.lr_scaling.size());
  lua_setfield(L, -2, "lr_scaling");
  set_number(L, "history", c.history);
  push_int_array(L, c.min_batch);
  lua_setfield(L, -2, "min_batch");
  push_int_array(L, c.max_batch);
  lua_setfield(L, -2, "max_batch");
  lua_createtable(L, static_cast<int>(c.devices.size()), 0);
  for (size_t i = 0; i < c.devices.size(); ++i) {
    lua_pushstring(L, c.devices[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, "devices");
  const nlohmann::json params = nlohmann::json::parse(c.params_json, nullptr, /*allow_exceptions=*/false);
  if (params.is_object() || params.is_array())
    push_json(L, params);
  else
    lua_newtable(L);
  // cluster.params is a proxy that records which keys are read (params_unread).
  const int raw = lua_gettop(L);
  lua_newtable(L);  // the keys read
  const int read = lua_gettop(L);
  lua_newtable(L);  // the proxy
  lua_newtable(L);  // its metatable
  lua_pushvalue(L, raw);
  lua_pushvalue(L, read);
  lua_pushcclosure(L, params_index, 2);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setfield(L, raw - 1, "params");
  lua_setfield(L, LUA_REGISTRYINDEX, kParamsRead);
  lua_setfield(L, LUA_REGISTRYINDEX, kParamsRaw);
  return 1;
}

struct StatsArgs {
  int64_t iteration, global_batch;
  const std::vector<WorkerStats>* stats;
  const ClusterStats* cluster;
  const std::vector<std::string>* devices;
  int history_ref, history_len;
};

// Pushes stats = {iteration, global_batch, workers, history}, after appending this
// iteration to the history window (oldest first, this one last).
int build_stats(lua_State* L) {
  const StatsArgs& a = *static_cast<StatsArgs*>(lua_touserdata(L, 1));
  const std::vector<WorkerStats>& s = *a.stats;
  lua_createtable(L, static_cast<int>(s.size()), 0);  // workers
  for (size_t i = 0; i < s.size(); ++i) {
    const WorkerStats& w = s[i];
    lua_createtable(L, 0, 16);
    set_number(L, "rank", static_cast<double>(i));
    if (i < a.devices->size()) {
      lua_pushstring(L, (*a.devices)[i].c_str());
      lua_setfield(L, -2, "device");
    }
    for (const StatsField& f : kWorkerStatsFields)
      if (f.shown & kShownToPolicy) set_number(L, f.name, stats_number(w, f) + (f.one_based_in_lua ? 1 : 0));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  const int workers = lua_gettop(L);

  lua_rawgeti(L, LUA_REGISTRYINDEX, a.history_ref);  // history
  const int history = lua_gettop(L);
  int n = static_cast<int>(lua_objlen(L, history));
  if (n >= a.history_len) {  // drop the oldest: shift down by one
    for (int i = 1; i < n; ++i) {
      lua_rawgeti(L, history, i + 1);
      lua_rawseti(L, history, i);
    }
    lua_pushnil(L);
    lua_rawseti(L, history, n);
    --n;
  }
  lua_createtable(L, 0, 3);
  set_number(L, "iteration", static_cast<double>(a.iteration));
  set_number(L, "global_batch", static_cast<double>(a.global_batch));
  lua_pushvalue(L, workers);
  lua_setfield(L, -2, "workers");
  lua_rawseti(L, history, n + 1);

  lua_createtable(L, 0, 10);  // stats
  set_number(L, "iteration", static_cast<double>(a.iteration));
  set_number(L, "global_batch", static_cast<double>(a.global_batch));
  const ClusterStats& c = *a.cluster;
  lua_pushstring(L, sync_mode_name(static_cast<SyncMode>(c.sync_mode)));
  lua_setfield(L, -2, "mode");
  if (c.global_grad_sq >= 0) set_number(L, "global_grad_sq", c.global_grad_sq);
  set_number(L, "iterations", c.iterations);
  set_number(L, "updates", static_cast<double>(c.updates));
  set_number(L, "dropped", static_cast<double>(c.dropped));
  set_number(L, "server_busy_ms", c.server_busy_ms);
  lua_pushvalue(L, workers);
  lua_setfield(L, -2, "workers");
  lua_pushvalue(L, history);
  lua_setfield(L, -2, "history");
  return 1;
}

// Whatever happens, the stack ends as it began (a failed traversal leaves its keys).
struct StackGuard {
  lua_State* L;
  int top;
  explicit StackGuard(lua_State* state) : L(state), top(lua_gettop(state)) {}
  ~StackGuard() { lua_settop(L, top); }
};

// (table, key) -> table[key], metamethods included: run through the sandbox's
// protected call, so a raising or endless __index fails as the policy's error.
int index_field(lua_State* L) {
  lua_gettable(L, 1);
  return 1;
}

}  // namespace

// While one lives, calls run under the setup budget.
struct PolicySandbox::Setup {
  int& depth;
  explicit Setup(int& d) : depth(d) { ++depth; }
  ~Setup() { --depth; }
};

PolicySandbox::PolicySandbox(const std::string& path, const PolicyLimits& limits)
    : path_(path), limits_(limits), state_(std::make_unique<CappedState>(limits.memory_mb, "policy " + path)) {
  const Setup setup(setup_);
  L_ = state_->get();
  lua_newtable(L_);  // stats.history
  history_ref_ = luaL_ref(L_, LUA_REGISTRYINDEX);
  try {
    load_file(L_, path, "policy");
  } catch (const std::exception& e) {
    throw PolicyFailure(PolicyFailure::Error, e.what());
  }
  call(nullptr, 0, 1, "loading policy " + path);
  if (!lua_istable(L_, -1) || [&] {
        push_field(-1, "init");
        push_field(-2, "step");
        const bool ok = lua_isfunction(L_, -1) && lua_isfunction(L_, -2);
        lua_pop(L_, 2);
        return !ok;
      }()) {
    const std::string got = lua_istable(L_, -1) ? "a table without them" : lua_value_text(L_, -1);
    lua_pop(L_, 1);
    throw PolicyFailure(PolicyFailure::Garbage,
                        "policy " + path + " must return a table with init(cluster) and step(stats) functions; it "
                        "returned " + got + "\n  what to do: end the file "
                            "with `return { init = function(cluster) ... end, step = function(stats) ... end }`");
  }
  policy_ref_ = luaL_ref(L_, LUA_REGISTRYINDEX);
}

PolicySandbox::~PolicySandbox() = default;

std::string PolicySandbox::name() const {
  std::string n = path_.substr(path_.find_last_of('/') + 1);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, ".lua") == 0) n.resize(n.size() - 4);
  return n;
}

double PolicySandbox::memory_mb() const { return state_->memory_mb(); }

// Runs policy[function] under the budget with the nargs arguments on top of the
// stack (function = null: the function is on the stack below its arguments).
void PolicySandbox::call(const char* function, int nargs, int nresults, const std::string& what) {
  if (function) {
    push_policy_field(function);
    lua_insert(L_, -(nargs + 1));
  }
  // What the call cost, whether it returned or failed (a failure's cost is reported too).
  struct Cost {
    PolicySandbox& box;
    ~Cost() {
      box.last_call_ms_ = box.state_->last_call_ms();
      box.last_call_cpu_ms_ = box.state_->last_call_cpu_ms();
    }
  } cost{*this};
  if (setup_ > 0) {
    // Where the setup budget comes from, from the constant that sets it.
    static const std::string sum = "policy.budget_ms + " + std::to_string(static_cast<int>(PolicyLimits::kSetupExtraMs)) +
                                   " ms, for loading, init(cluster) and restore(state)";
    static const std::string own = "policy.init_budget_ms, for loading, init(cluster) and restore(state)";
    state_->call(nargs, nresults, what, limits_.setup_budget_ms(), (limits_.setup_ms > 0 ? own : sum).c_str());
  } else
    state_->call(nargs, nresults, what, limits_.budget_ms);
}

void PolicySandbox::init(const PolicyCluster& cluster) {
  const Setup setup(setup_);
  workers_ = cluster.workers;
  devices_ = cluster.devices;
  history_len_ = std::max(1, cluster.history);
  ClusterArgs args{&cluster};
  lua_pushcfunction(L_, build_cluster);
  lua_pushlightuserdata(L_, &args);
  call(nullptr, 1, 1, "building the cluster table for policy " + path_);  // cluster
  call("init", 1, 0, "calling init(cluster) of policy " + path_);
  const StackGuard guard(L_);
  lua_pushcfunction(L_, params_unread);
  call(nullptr, 0, 2, "checking the parameters of policy " + path_);
  const std::string unread = lua_isstring(L_, -2) ? lua_tostring(L_, -2) : "";
  if (!unread.empty()) {
    const std::string read = lua_isstring(L_, -1) ? lua_tostring(L_, -1) : "";
    throw PolicyFailure(PolicyFailure::Garbage,
                        "policy " + name() + " has no parameter " + unread + " (policy.params): init() never read it" +
                            "\n  what to do: " + (read.empty() ? "this policy takes no parameters; drop policy.params"
                                                                : "its parameters are " + read +
                                                                      " (the header of " + path_ + " documents them)"));
  }
  lua_pushcfunction(L_, list_params_in_force);
  call(nullptr, 0, 1, "listing the parameters of policy " + path_);
  params_in_force_ = lua_isstring(L_, -1) ? lua_tostring(L_, -1) : "";
}

void PolicySandbox::observe(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                            const ClusterStats& cluster) {
  StatsArgs args{iteration, global_batch, &stats, &cluster, &devices_, history_ref_, history_len_};
  lua_pushcfunction(L_, build_stats);
  lua_pushlightuserdata(L_, &args);
  call(nullptr, 1, 0, "recording the stats for policy " + path_);
}

PolicyAnswer PolicySandbox::step(int64_t iteration, int64_t global_batch, const std::vector<WorkerStats>& stats,
                                 const ClusterStats& cluster) {
  StatsArgs args{iteration, global_batch, &stats, &cluster, &devices_, history_ref_, history_len_};
  const double start = now_ms(), start_cpu = thread_cpu_ms();
  lua_pushcfunction(L_, build_stats);
  lua_pushlightuserdata(L_, &args);
  call(nullptr, 1, 1, "building the stats table for policy " + path_);  // stats
  call("step", 1, 2, "calling step(stats) of policy " + path_);           // answer, reason?
  last_call_ms_ = now_ms() - start;
  last_call_cpu_ms_ = thread_cpu_ms() - start_cpu;

  // Read the answer without running any metamethod (raw access only: nothing here
  // can raise), then leave the stack as it was.
  PolicyAnswer answer;
  const int top = lua_gettop(L_);
  const int ans = top - 1;
  struct Pop {
    lua_State* L;
    int to;
    ~Pop() { lua_settop(L, to); }
  } pop{L_, top - 2};
  if (lua_isnil(L_, ans)) return answer;
  auto garbage = [&](const std::string& why) {
    return PolicyFailure(PolicyFailure::Garbage,
                         "step(stats) of policy " + path_ + " " + why +
                             "\n  what to do: return nil to keep the plan, or {local_batch = {b1, ..., bN}, reason "
                             "= '...'} with one integer per worker");
  };
  if (!lua_istable(L_, ans)) throw garbage("returned " + lua_value_text(L_, ans) + ", not a plan table");
  lua_pushstring(L_, "reason");
  lua_rawget(L_, ans);
  // Whole (a NUL inside is the reason's, not its end), and at most 4 KB of it: the
  // trace keeps 256 bytes, and the answer crosses the worker's socket.
  auto take_reason = [&](int idx) {
    size_t len = 0;
    const char* r = lua_tolstring(L_, idx, &len);
    answer.reason.assign(r, std::min<size_t>(len, 4096));
  };
  if (lua_type(L_, -1) == LUA_TSTRING) take_reason(-1);
  lua_pop(L_, 1);
  if (answer.reason.empty() && lua_type(L_, top) == LUA_TSTRING) take_reason(top);
  read_int_list(ans, "local_batch", "batch", "local batches", true, garbage, answer.local_batch);
  read_int_list(ans, "micro_batches", "micro-batch count", "micro-batch counts", false, garbage,
                answer.micro_batches);
  read_sync(ans, garbage, answer.sync);
  read_metrics(ans, garbage, answer.metrics);
  answer.keep = false;
  return answer;
}

template <typename Garbage>
bool PolicySandbox::read_int_list(int ans, const char* key, const char* item, const char* items, bool required,
                                  const Garbage& garbage, std::vector<int64_t>& out) {
  lua_pushstring(L_, key);
  lua_rawget(L_, ans);
  const int list = lua_gettop(L_);
  if (lua_isnil(L_, list) && !required) {
    lua_pop(L_, 1);
    return false;
  }
  if (!lua_istable(L_, list)) throw garbage(std::string("returned a table without a ") + key + " list");
  const int n = static_cast<int>(lua_objlen(L_, list));
  if (n != workers_)
    throw garbage("returned " + std::to_string(n) + " " + items + " for " + std::to_string(workers_) + " workers");
  out.resize(static_cast<size_t>(n));
  for (int i = 1; i <= n; ++i) {
    lua_rawgeti(L_, list, i);
    const bool number = lua_type(L_, -1) == LUA_TNUMBER;
    const double v = number ? lua_tonumber(L_, -1) : 0.0;
    const std::string text = number ? "" : lua_value_text(L_, -1);
    lua_pop(L_, 1);
    if (!number) throw garbage("gave worker " + std::to_string(i - 1) + " the " + item + " " + text + ", not a number");
    if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.0e15)
      throw garbage("gave worker " + std::to_string(i - 1) + " the " + item + " " + std::to_string(v) +
                    ", not a finite integer");
    out[static_cast<size_t>(i - 1)] = static_cast<int64_t>(v);
  }
  lua_pop(L_, 1);
  return true;
}

// metrics = {name = number, ...}, optional: raw reads, in a fixed order (sorted by
// name) so that the trace does not depend on the table's hash order.
template <typename Garbage>
void PolicySandbox::read_metrics(int ans, const Garbage& garbage, std::vector<std::pair<std::string, double>>& metrics) {
  lua_pushstring(L_, "metrics");
  lua_rawget(L_, ans);
  const int table = lua_gettop(L_);
  if (lua_isnil(L_, table)) {
    lua_pop(L_, 1);
    return;
  }
  if (!lua_istable(L_, table)) throw garbage("returned metrics = " + lua_value_text(L_, table) + ", not a table");
  lua_pushnil(L_);
  while (lua_next(L_, table) != 0) {  // key at -2, value at -1
    if (lua_type(L_, -2) != LUA_TSTRING) throw garbage("returned a metric named " + lua_value_text(L_, -2));
    size_t len = 0;
    const char* k = lua_tolstring(L_, -2, &len);
    std::string name(k, len);
    const bool plain = !name.empty() && name.size() <= 64 &&
                       std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!plain) throw garbage("returned a metric named '" + name.substr(0, 64) + "' (letters, digits and _ only, at most 64)");
    if (lua_type(L_, -1) != LUA_TNUMBER || !std::isfinite(lua_tonumber(L_, -1)))
      throw garbage("returned metrics." + name + " = " + lua_value_text(L_, -1) + ", not a finite number");
    if (metrics.size() == kMaxPolicyMetrics)
      throw garbage("returned more than " + std::to_string(kMaxPolicyMetrics) + " metrics");
    metrics.emplace_back(std::move(name), lua_tonumber(L_, -1));
    lua_pop(L_, 1);
  }
  lua_pop(L_, 1);
  std::sort(metrics.begin(), metrics.end());
}

// The sync-mode fields of a plan table, all optional: mode (bsp when absent: a plan
// without a mode is a bsp plan, so the batch-only policies stay bsp policies),
// groups (one 1-based group per worker), k, local_steps, staleness, sync_every.
// Raw reads only; the combination is checked by Plan::validate in the host.
template <typename Garbage>
void PolicySandbox::read_sync(int ans, const Garbage& garbage, SyncPlan& sync) {
  lua_pushstring(L_, "mode");
  lua_rawget(L_, ans);
  if (!lua_isnil(L_, -1)) {
    size_t length = 0;  // the whole string: 'bsp\0evil' is not bsp
    const char* text = lua_type(L_, -1) == LUA_TSTRING ? lua_tolstring(L_, -1, &length) : nullptr;
    const std::string mode = text ? std::string(text, length) : lua_value_text(L_, -1);
    lua_pop(L_, 1);
    if (!parse_sync_mode(mode, &sync.mode))
      throw garbage("returned mode '" + printable(mode) + "', not one of 'bsp', 'grouped', 'ksync', 'local'");
  } else {
    lua_pop(L_, 1);
  }
  auto integer = [&](const char* key, int* out) {
    lua_pushstring(L_, key);
    lua_rawget(L_, ans);
    if (!lua_isnil(L_, -1)) {
      const bool number = lua_type(L_, -1) == LUA_TNUMBER;
      const double v = number ? lua_tonumber(L_, -1) : 0.0;
      const std::string text = lua_value_text(L_, -1);
      lua_pop(L_, 1);
      if (!number || !std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 1e9)
        throw garbage("returned " + std::string(key) + " = " + text + ", not an integer");
      *out = static_cast<int>(v);
    } else {
      lua_pop(L_, 1);
    }
  };
  integer("k", &sync.k);
  integer("local_steps", &sync.local_steps);
  integer("staleness", &sync.staleness);
  integer("sync_every", &sync.sync_every);
  if (sync.mode == SyncMode::ksync && sync.k == 0) sync.k = workers_;
  lua_pushstring(L_, "groups");
  lua_rawget(L_, ans);
  if (lua_istable(L_, -1)) {
    const int list = lua_gettop(L_);
    const int n = static_cast<int>(lua_objlen(L_, list));
    if (n != workers_)
      throw garbage("returned " + std::to_string(n) + " groups for " + std::to_string(workers_) + " workers");
    for (int i = 1; i <= n; ++i) {
      lua_rawgeti(L_, list, i);
      const bool number = lua_type(L_, -1) == LUA_TNUMBER;
      const double v = number ? lua_tonumber(L_, -1) : 0.0;
      lua_pop(L_, 1);
      if (!number || v != std::floor(v) || v < 1 || v > workers_)
        throw garbage("put worker " + std::to_string(i - 1) + " in group " + std::to_string(v) + ", not 1.." +
                      std::to_string(workers_));
      sync.group.push_back(static_cast<int>(v) - 1);
    }
  } else if (!lua_isnil(L_, -1)) {
    throw garbage("returned groups = " + lua_value_text(L_, -1) + ", not a list of group numbers");
  }
  lua_pop(L_, 1);
  if (sync.mode == SyncMode::grouped && sync.group.empty()) sync.group.assign(static_cast<size_t>(workers_), 0);
  if (sync.mode != SyncMode::grouped) sync.group.clear();
}

namespace {

// The plain value at idx as a Lua literal; throws PolicyFailure for anything else.
void write_literal(lua_State* L, int idx, int depth, std::string& out) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL: out += "nil"; return;
    case LUA_TBOOLEAN: out += lua_toboolean(L, idx) ? "true" : "false"; return;
    case LUA_TNUMBER: {
      const double v = lua_tonumber(L, idx);
      if (std::isnan(v)) out += "(0/0)";
      else if (std::isinf(v)) out += v > 0 ? "(1/0)" : "(-1/0)";
      else {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        out += buf;
      }
      return;
    }
    case LUA_TSTRING: {
      size_t len = 0;
      const char* s = lua_tolstring(L, idx, &len);
      out += '"';
      for (size_t i = 0; i < len; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 32 || c >= 127) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\%03u", c);  // 3 digits: a digit after it cannot join
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
      }
      out += '"';
      return;
    }
    case LUA_TTABLE: {
      if (depth > 64)
        throw PolicyFailure(PolicyFailure::Garbage, "save() returned tables nested deeper than 64 levels (a cycle?)");
      idx = abs_index(L, idx);
      out += '{';
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        const int kt = lua_type(L, -2);
        if (kt != LUA_TNUMBER && kt != LUA_TSTRING && kt != LUA_TBOOLEAN) {
          lua_pop(L, 2);
          throw PolicyFailure(PolicyFailure::Garbage, std::string("save() returned a table with a ") +
                                                          lua_typename(L, kt) + " key: a checkpoint holds plain data");
        }
        out += '[';
        write_literal(L, -2, depth + 1, out);
        out += "]=";
        write_literal(L, -1, depth + 1, out);
        out += ',';
        lua_pop(L, 1);
      }
      out += '}';
      return;
    }
    default:
      throw PolicyFailure(PolicyFailure::Garbage,
                          std::string("save() returned a ") + luaL_typename(L, idx) +
                              ": a checkpoint holds plain data (tables, numbers, strings, booleans)");
  }
}

}  // namespace

void PolicySandbox::push_field(int table, const char* name) {
  table = abs_index(L_, table);
  lua_pushcfunction(L_, index_field);
  lua_pushvalue(L_, table);
  lua_pushstring(L_, name);
  call(nullptr, 2, 1, std::string("looking up ") + name + " in policy " + path_);
}

void PolicySandbox::push_policy_field(const char* name) {
  lua_rawgeti(L_, LUA_REGISTRYINDEX, policy_ref_);
  push_field(-1, name);
  lua_remove(L_, -2);
}

bool PolicySandbox::has_policy_function(const char* name) {
  push_policy_field(name);
  const bool yes = lua_isfunction(L_, -1);
  lua_pop(L_, 1);
  return yes;
}

std::string PolicySandbox::save_literal() {
  if (!has_policy_function("save")) return "";
  const StackGuard guard(L_);
  call("save", 0, 1, "calling save() of policy " + path_ + " for a checkpoint");
  std::string out;
  write_literal(L_, -1, 0, out);
  // Read back now, not at resume: a state the parser refuses (LuaJIT allows 65536
  // constants a chunk) must be reported when it is saved.
  const std::string chunk = "return " + out;
  if (luaL_loadbuffer(L_, chunk.data(), chunk.size(), "=checkpoint policy state") != 0)
    throw PolicyFailure(PolicyFailure::Garbage, std::string("save() returned a state that cannot be read back (") +
                                                    lua_tostring(L_, -1) + "): keep it smaller (fewer tables)");
  return out;
}

bool PolicySandbox::restore_literal(const std::string& literal) {
  const Setup setup(setup_);
  if (literal.empty() || !has_policy_function("restore")) return false;
  const StackGuard guard(L_);
  const std::string chunk = "return " + literal;
  if (luaL_loadbuffer(L_, chunk.data(), chunk.size(), "=checkpoint policy state") != 0)
    throw PolicyFailure(PolicyFailure::Garbage, std::string("the checkpoint's policy state does not parse: ") +
                                                    lua_tostring(L_, -1));
  lua_newtable(L_);  // an empty environment: the literal is data, it reaches nothing
  lua_setfenv(L_, -2);
  call(nullptr, 0, 1, "reading the checkpoint's state for policy " + path_);
  call("restore", 1, 0, "calling restore(state) of policy " + path_ + " from a checkpoint");
  return true;
}

}  // namespace tandem
