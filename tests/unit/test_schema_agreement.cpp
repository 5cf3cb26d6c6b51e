// The experiment schema lives in scripts/tandem/experiment.lua; ExperimentConfig
// (engine/train/config.hpp) and the tables of engine/script/experiment_fields.cpp
// must agree with it on every key, kind and default, nested ones included. These
// tests fail, naming the key, the moment one side changes without the other, and
// show on altered copies of the Lua side that a drift is caught.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.hpp"
#include "engine/script/experiment_fields.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/script/lua_state.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_schema_agreement)  // ctest's unit.test_schema_agreement (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
using nlohmann::json;

namespace {

// The least an experiment must say, plus one empty entry in each list of records, so
// that the entries' defaults are resolved too.
const char* const kMinimal =
    "return { model = 'mlp', faults = {{}}, emulation = { workers = {{}}, events = {{}} } }";

struct LuaSide {
  json schema, resolved;
};

LuaSide lua_side() {
  LuaState L;
  LuaSide side;
  require_module(L, "tandem.experiment");
  lua_getfield(L, -1, "schema");
  side.schema = lua_to_json(L, -1, "schema");
  lua_pop(L, 2);
  push_module_function(L, "tandem.experiment", "resolve");
  BOOST_TEST_REQUIRE(luaL_loadstring(L, kMinimal) == 0);
  protected_call(L, 0, 1, "building the minimal experiment");
  lua_newtable(L);  // no overrides
  lua_pushstring(L, "minimal.lua");
  protected_call(L, 3, 1, "resolving the minimal experiment");
  side.resolved = lua_to_json(L, -1, "experiment");
  return side;
}

ExperimentConfig cpp_defaults() {
  ExperimentConfig d;
  d.faults.emplace_back();
  d.emulation.workers.emplace_back();
  d.emulation.events.emplace_back();
  return d;
}

std::string lines(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += "\n  " + s;
  return out;
}

bool names(const std::vector<std::string>& found, const std::string& key) {
  for (const std::string& s : found)
    if (s.rfind(key + ":", 0) == 0) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(lua_schema_and_experiment_config_agree) {
  const LuaSide lua = lua_side();
  const std::vector<std::string> found = schema_disagreements(lua.schema, lua.resolved, cpp_defaults());
  BOOST_TEST(found.empty(), "scripts/tandem/experiment.lua and ExperimentConfig disagree:" << lines(found));
}

BOOST_AUTO_TEST_CASE(a_changed_default_is_named) {
  LuaSide lua = lua_side();
  lua.resolved["sim"]["latency_us"] = 6;
  lua.resolved["faults"][0]["kind"] = "stop";
  lua.resolved["emulation"]["events"][0]["speed"] = 0.5;
  lua.resolved["lr"] = 0.1;
  const std::vector<std::string> found = schema_disagreements(lua.schema, lua.resolved, cpp_defaults());
  BOOST_TEST(found.size() == 4u, lines(found));
  for (const char* key : {"sim.latency_us", "faults[1].kind", "emulation.events[1].speed", "lr"})
    BOOST_TEST(names(found, key), key << " not named in:" << lines(found));

  ExperimentConfig d = cpp_defaults();
  d.checkpoint.keep = 4;
  d.data.shape = {3, 32, 32};
  const LuaSide unchanged = lua_side();
  const std::vector<std::string> cpp = schema_disagreements(unchanged.schema, unchanged.resolved, d);
  BOOST_TEST(names(cpp, "checkpoint.keep"), lines(cpp));
  BOOST_TEST(names(cpp, "data.shape"), lines(cpp));
}

BOOST_AUTO_TEST_CASE(a_key_on_one_side_only_is_named) {
  LuaSide lua = lua_side();
  lua.schema["fields"]["sim"]["fields"]["jitter_ms"] = {{"kind", "number"}, {"default", 0}};
  lua.schema["fields"]["policy"]["fields"].erase("history");
  const std::vector<std::string> found = schema_disagreements(lua.schema, lua.resolved, cpp_defaults());
  BOOST_TEST(names(found, "sim.jitter_ms"), lines(found));
  BOOST_TEST(names(found, "policy.history"), lines(found));
}

BOOST_AUTO_TEST_CASE(a_changed_kind_or_optionality_is_named) {
  LuaSide lua = lua_side();
  lua.schema["fields"]["log_every"]["kind"] = "number";
  lua.schema["fields"]["emulation"]["fields"]["speeds"]["item"]["kind"] = "integer";
  lua.schema["fields"]["stop"]["fields"]["max_seconds"]["default"] = 60;
  const std::vector<std::string> found = schema_disagreements(lua.schema, lua.resolved, cpp_defaults());
  BOOST_TEST(names(found, "log_every"), lines(found));
  BOOST_TEST(names(found, "emulation.speeds"), lines(found));
  BOOST_TEST(names(found, "stop.max_seconds"), lines(found));
}

// A key read into a C++ int must have a Lua max that int holds: otherwise resolve()
// lets through a value (workers = 1e10) that C++ can only refuse without the
// schema's range, or would wrap.
BOOST_AUTO_TEST_CASE(an_int_key_without_a_max_it_holds_is_named) {
  LuaSide lua = lua_side();
  lua.schema["fields"]["workers"].erase("max");
  lua.schema["fields"]["sync"]["fields"]["local_steps"]["max"] = 1e10;
  lua.schema["fields"]["faults"]["item"]["fields"]["rank"].erase("max");
  const std::vector<std::string> found = schema_disagreements(lua.schema, lua.resolved, cpp_defaults());
  BOOST_TEST(found.size() == 3u, lines(found));
  for (const char* key : {"workers", "sync.local_steps", "faults[1].rank"})
    BOOST_TEST(names(found, key), key << " not named in:" << lines(found));
  CHECK_CONTAINS(lines(found), "holds at most 2147483647");
}

// An integer past its member's range is refused with the range, not wrapped.
BOOST_AUTO_TEST_CASE(an_integer_past_its_member_is_refused_with_the_range) {
  json huge = lua_side().resolved;
  huge["workers"] = 1e10;
  CHECK_CONTAINS(error_of([&] { config_from_resolved(huge); }),
                 "'workers' = 10000000000.0 is not an integer from -2147483648 to 2147483647");
  json wide = lua_side().resolved;
  wide["global_batch"] = 1e308;
  CHECK_CONTAINS(error_of([&] { config_from_resolved(wide); }), "'global_batch' = 1e+308 is not an integer");
}

BOOST_AUTO_TEST_CASE(reading_fails_on_a_key_either_side_lacks) {
  LuaSide lua = lua_side();
  json extra = lua.resolved;
  extra["checkpoint"]["compress"] = true;
  CHECK_CONTAINS(error_of([&] { config_from_resolved(extra); }), "'checkpoint.compress', which no field of ExperimentConfig");
  json missing = lua.resolved;
  missing["sync"].erase("staleness");
  CHECK_CONTAINS(error_of([&] { config_from_resolved(missing); }), "has no 'sync.staleness'");
  json mistyped = lua.resolved;
  mistyped["policy"]["history"] = "many";
  CHECK_CONTAINS(error_of([&] { config_from_resolved(mistyped); }), "'policy.history' = \"many\" does not fit");
}

BOOST_AUTO_TEST_CASE(the_minimal_experiment_reads_into_the_defaults) {
  json resolved = lua_side().resolved;
  const ExperimentConfig c = config_from_resolved(resolved);
  const ExperimentConfig d = cpp_defaults();
  BOOST_TEST(c.name == "minimal");
  BOOST_TEST(c.model.name == "mlp");
  BOOST_TEST(c.optimizer.slow_momentum == d.optimizer.slow_momentum);
  BOOST_TEST(c.plan.sync.sync_every == d.plan.sync.sync_every);
  BOOST_TEST(c.emulation.enabled);  // workers and events given
  BOOST_TEST_REQUIRE(c.emulation.events.size() == 1u);
  BOOST_TEST(c.emulation.events[0].to == d.emulation.events[0].to);  // no end: until the run ends
  BOOST_TEST_REQUIRE(c.emulation.workers.size() == 1u);
  BOOST_TEST(c.emulation.workers[0].speed == 1.0);
  BOOST_TEST(!c.emulation.workers[0].profile.has_value());
  BOOST_TEST(c.policy.params_json == "{}");
  BOOST_TEST(resolved.at("stop").at("max_seconds").is_null());
}

BOOST_AUTO_TEST_SUITE_END()  // test_schema_agreement
