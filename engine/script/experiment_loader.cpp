#include "engine/script/experiment_loader.hpp"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <optional>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"
#include "engine/data/datasets.hpp"
#include "engine/dist/launcher.hpp"
#include "engine/nn/model.hpp"
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

// Readers for the resolved JSON. resolve() has validated every value, so a missing
// or mistyped field here means scripts/tandem/experiment.lua and this file disagree.
const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    TANDEM_FAIL_HINT("keep scripts/tandem/experiment.lua and engine/script/experiment_loader.cpp in step",
                     "the resolved experiment has no '", where, key, "'");
  return j.at(key);
}

template <typename T>
T get(const json& j, const char* key, const std::string& where = "") {
  return field(j, key, where).get<T>();
}

template <typename T>
std::optional<T> get_optional(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}

Shape to_shape(const json& j) {
  Shape s;
  for (const auto& d : j) s.push_back(d.get<int64_t>());
  return s;
}

LayerSpec to_layer(const json& l) {
  LayerSpec ls;
  ls.type = get<std::string>(l, "type", "model.layers[].");
  ls.where = l.value("where", std::string("?"));
  const json& args = field(l, "args", "model.layers[].");
  if (args.is_object())
    for (const auto& [k, v] : args.items()) ls.args[k] = v.get<double>();
  for (const auto& [key, list] : {std::pair<const char*, std::vector<LayerSpec>*>{"body", &ls.body},
                                  {"shortcut", &ls.shortcut}})
    if (l.contains(key) && l.at(key).is_array())
      for (const auto& sub : l.at(key)) list->push_back(to_layer(sub));
  return ls;
}

ModelSpec to_model(const json& m) {
  ModelSpec spec;
  spec.name = get<std::string>(m, "name", "model.");
  spec.input = to_shape(field(m, "input", "model."));
  spec.classes = get<int>(m, "classes", "model.");
  for (const auto& l : field(m, "layers", "model.")) spec.layers.push_back(to_layer(l));
  return spec;
}

template <typename T>
std::vector<T> get_list(const json& j, const char* key) {
  std::vector<T> out;
  if (j.contains(key) && j.at(key).is_array())
    for (const auto& v : j.at(key)) out.push_back(v.get<T>());
  return out;
}

// Emulation: the shorthands (speeds, comm_delay_ms lists) fold into one entry per
// worker, which is what the emulator reads.
EmulationConfig to_emulation(const json& e) {
  EmulationConfig c;
  c.enabled = get<bool>(e, "enabled", "emulation.");
  c.reference = get<double>(e, "reference", "emulation.");
  if (e.contains("workers") && e.at("workers").is_array()) {
    for (const auto& w : e.at("workers")) {
      WorkerEmulation we;
      if (auto speed = get_optional<double>(w, "speed")) we.speed = *speed;
      if (auto delay = get_optional<double>(w, "comm_delay_ms")) we.comm_delay_ms = *delay;
      if (w.contains("profile")) {
        DeviceProfile p{get_list<double>(w.at("profile"), "batch"), get_list<double>(w.at("profile"), "ms")};
        if (!p.batch.empty() || !p.ms.empty()) we.profile = p;
      }
      c.workers.push_back(we);
    }
  }
  const auto speeds = get_list<double>(e, "speeds");
  const auto delays = get_list<double>(e, "comm_delay_ms");
  if (c.workers.size() < std::max(speeds.size(), delays.size())) c.workers.resize(std::max(speeds.size(), delays.size()));
  for (size_t i = 0; i < speeds.size(); ++i) c.workers[i].speed = speeds[i];
  for (size_t i = 0; i < delays.size(); ++i) c.workers[i].comm_delay_ms = delays[i];
  if (e.contains("events") && e.at("events").is_array()) {
    for (const auto& ev : e.at("events")) {
      SlowdownEvent s;
      s.worker = get<int>(ev, "worker", "emulation.events[].");
      s.speed = get<double>(ev, "speed", "emulation.events[].");
      s.from = get<int64_t>(ev, "from", "emulation.events[].");
      s.to = get_optional<int64_t>(ev, "to").value_or(INT64_MAX);  // no end: until the run ends
      c.events.push_back(s);
    }
  }
  const json& r = field(e, "random", "emulation.");
  c.random.probability = get<double>(r, "probability", "emulation.random.");
  c.random.seed = get<uint64_t>(r, "seed", "emulation.random.");
  if (const auto d = get_list<int64_t>(r, "duration"); d.size() == 2) {
    c.random.min_duration = d[0];
    c.random.max_duration = d[1];
  }
  if (const auto sp = get_list<double>(r, "speed"); sp.size() == 2) {
    c.random.min_speed = sp[0];
    c.random.max_speed = sp[1];
  }
  c.speed_trace = get_optional<std::string>(e, "speed_trace").value_or("");
  if (e.contains("calibration")) {
    DeviceProfile p{get_list<double>(e.at("calibration"), "batch"), get_list<double>(e.at("calibration"), "ms")};
    if (!p.batch.empty() || !p.ms.empty()) {
      TANDEM_CHECK_HINT(p.batch.size() == p.ms.size(), "copy both lists from a run's calibration.json",
                        "emulation.calibration has ", p.batch.size(), " batches but ", p.ms.size(), " times");
      p.host_ms = get_list<double>(e.at("calibration"), "host_ms");
      TANDEM_CHECK_HINT(p.host_ms.empty() || p.host_ms.size() == p.batch.size(),
                        "copy the lists from a run's calibration.json", "emulation.calibration has ", p.batch.size(),
                        " batches but ", p.host_ms.size(), " host times");
      c.calibration = p;
    }
  }
  return c;
}

ExperimentConfig to_config(json& j) {
  ExperimentConfig c;
  c.name = get<std::string>(j, "name");
  c.model = to_model(field(j, "model", ""));

  const json& d = field(j, "data", "");
  c.data.name = get<std::string>(d, "name", "data.");
  c.data.dir = get<std::string>(d, "dir", "data.");
  c.data.shape = to_shape(field(d, "shape", "data."));
  c.data.classes = get<int>(d, "classes", "data.");
  c.data.train_size = get<int64_t>(d, "train_size", "data.");
  c.data.test_size = get<int64_t>(d, "test_size", "data.");
  c.data.seed = get<uint64_t>(d, "seed", "data.");

  c.global_batch = get<int64_t>(j, "global_batch");
  c.optimizer.name = get<std::string>(j, "optimizer");
  c.optimizer.lr = get<double>(j, "lr");
  c.optimizer.momentum = get<double>(j, "momentum");
  c.optimizer.weight_decay = get<double>(j, "weight_decay");
  c.optimizer.nesterov = get<bool>(j, "nesterov");

  const json& s = field(j, "schedule", "");
  c.schedule.kind = get<std::string>(s, "kind", "schedule.");
  c.schedule.warmup_iterations = get<int64_t>(s, "warmup_iterations", "schedule.");
  c.schedule.step_epochs = get<double>(s, "step_epochs", "schedule.");
  c.schedule.gamma = get<double>(s, "gamma", "schedule.");
  c.schedule.min_lr = get<double>(s, "min_lr", "schedule.");

  json& st = j.at("stop");
  c.stop.epochs = get<double>(st, "epochs", "stop.");
  c.stop.target_accuracy = get_optional<double>(st, "target_accuracy");
  c.stop.max_iterations = get_optional<int64_t>(st, "max_iterations");
  c.stop.max_seconds = get_optional<double>(st, "max_seconds");
  // Unset optional keys are written as null, so config.json shows every key.
  for (const char* k : {"target_accuracy", "max_iterations", "max_seconds"})
    if (!st.contains(k)) st[k] = nullptr;

  c.eval_every = get<int64_t>(j, "eval_every");
  c.log_every = get<int64_t>(j, "log_every");
  c.eval_batch = get<int64_t>(j, "eval_batch");
  c.seed = get<uint64_t>(j, "seed");
  c.blas_threads = get<int>(j, "blas_threads");
  c.device.kind = get<std::string>(j, "device");
  c.device.per_worker = get_list<std::string>(j, "devices");
  c.device.tf32 = get<bool>(j, "tf32");
  c.log_level = get<std::string>(j, "log_level");
  c.out_dir = get<std::string>(j, "out_dir");
  c.save_params = get<bool>(j, "save_params");
  c.console = get<bool>(j, "console");
  const json& sim = field(j, "sim", "");
  c.sim.noise = get<double>(sim, "noise", "sim.");
  c.sim.noise_distribution = get<std::string>(sim, "noise_distribution", "sim.");
  c.sim.seed = get<uint64_t>(sim, "seed", "sim.");
  c.sim.latency_us = get<double>(sim, "latency_us", "sim.");
  c.sim.bandwidth_gb_s = get<double>(sim, "bandwidth_gb_s", "sim.");
  c.sim.trace_every = get<int64_t>(sim, "trace_every", "sim.");

  c.workers = get<int>(j, "workers");
  c.collective_timeout_s = get<double>(j, "collective_timeout_s");
  const json& ck = field(j, "checkpoint", "");
  c.checkpoint.every = get<int64_t>(ck, "every", "checkpoint.");
  c.checkpoint.every_s = get<double>(ck, "every_s", "checkpoint.");
  c.checkpoint.keep = get<int64_t>(ck, "keep", "checkpoint.");
  c.checkpoint.final = get<bool>(ck, "final", "checkpoint.");
  c.max_nonfinite_steps = get<int64_t>(j, "max_nonfinite_steps");
  if (j.contains("faults") && j["faults"].is_array()) {
    for (const json& f : j["faults"]) {
      FaultConfig fc;
      fc.rank = get<int>(f, "rank", "faults[].");
      fc.iteration = get<int64_t>(f, "iteration", "faults[].");
      fc.kind = get<std::string>(f, "kind", "faults[].");
      fc.during = get<std::string>(f, "during", "faults[].");
      c.faults.push_back(fc);
    }
  }
  const json& plan = field(j, "plan", "");
  c.plan.kind = get<std::string>(plan, "kind", "plan.");
  c.plan.batches = get_list<int64_t>(plan, "batches");
  const json& sync = field(j, "sync", "");
  c.plan.sync.mode = get<std::string>(sync, "mode", "sync.");
  c.plan.sync.groups = get_list<int64_t>(sync, "groups");
  c.plan.sync.k = get<int>(sync, "k", "sync.");
  c.plan.sync.local_steps = get<int>(sync, "local_steps", "sync.");
  c.plan.sync.staleness = get<int>(sync, "staleness", "sync.");
  c.plan.sync.sync_every = get<int>(sync, "sync_every", "sync.");
  c.optimizer.slow_momentum = get<double>(sync, "slow_momentum", "sync.");
  c.emulation = to_emulation(field(j, "emulation", ""));

  const json& pol = field(j, "policy", "");
  if (auto file = get_optional<std::string>(pol, "file")) c.policy.file = *file;
  if (pol.contains("params")) c.policy.params_json = pol.at("params").dump();
  c.policy.budget_ms = get<double>(pol, "budget_ms", "policy.");
  c.policy.memory_mb = get<double>(pol, "memory_mb", "policy.");
  c.policy.max_failures = get<int>(pol, "max_failures", "policy.");
  c.policy.history = get<int>(pol, "history", "policy.");
  c.policy.watch = get<bool>(pol, "watch", "policy.");
  c.policy.min_batch = get<int64_t>(pol, "min_batch", "policy.");
  c.policy.max_batch = get_list<int64_t>(pol, "max_batch");
  return c;
}

}  // namespace

json lua_to_json(lua_State* L, int idx, const std::string& path) { return to_json(L, idx, path, 0); }

ExperimentConfig load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  // Under mpirun the per-worker settings must fit the ranks it started.
  const int world = mpi_world_size();
  json resolved;
  {
    LuaState L;
    push_module_function(L, "tandem.experiment", "resolve");  // resolve
    load_file(L, path, "experiment");                          // resolve, chunk
    protected_call(L, 0, 1, "running experiment " + path);     // resolve, experiment table
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
    protected_call(L, 4, 1, "resolving experiment " + path);  // resolved table
    TANDEM_CHECK(lua_istable(L, -1), "tandem.experiment.resolve returned a ", luaL_typename(L, -1),
                 ", not the resolved experiment table");
    resolved = lua_to_json(L, -1, "experiment");
  }
  if (resolved.contains("overrides") && resolved["overrides"].empty()) resolved["overrides"] = json::array();
  ExperimentConfig config;
  try {
    config = to_config(resolved);
  } catch (const nlohmann::json::exception& e) {
    TANDEM_FAIL_HINT("keep scripts/tandem/experiment.lua and engine/script/experiment_loader.cpp in step",
                     "the resolved experiment ", path, " does not fit ExperimentConfig: ", e.what());
  }
  config.source = path;
  config.resolved_json = resolved.dump(2);

  // What can only be checked outside Lua, checked before any worker starts: the
  // data files, and (when this process is about to start the ranks) that the model
  // fits the data's samples, which the ranks would otherwise find each on its own
  // after mpirun has started them.
  check_dataset_files(config.data);
  if (world == 0 && config.workers > 1) {
    try {
      Model probe(cpu_device(), config.model, config.seed);
    } catch (const Error& e) {
      TANDEM_FAIL_HINT("fix the model (" + resolved["model"].value("file", std::string("its file")) +
                           ") or its model_args, or the data's shape",
                       "the model of ", path, " does not fit the data's samples ", shape_str(config.model.input), ": ",
                       e.what());
    }
  }
  return config;
}

}  // namespace tandem
