// WorkerStats's fields are declared once (engine/train/worker_stats_fields.hpp) and
// reach the policy, the console and the trace from there. These tests hold each
// consumer to the table: every field it should show arrives with its value, no other
// does, and the trace's bytes are what they have always been.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/script/lua_state.hpp"
#include "engine/script/policy_sandbox.hpp"
#include "engine/script/repl.hpp"
#include "engine/train/record/trace.hpp"
#include "engine/train/worker_stats_fields.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_worker_stats_fields)  // ctest's unit.test_worker_stats_fields (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

// Stats whose every number field holds its own value (100 + its row in the table),
// so a field read from the wrong member shows.
WorkerStats distinct_stats() {
  WorkerStats w;
  for (size_t i = 0; i < std::size(kWorkerStatsFields); ++i) {
    const StatsField& f = kWorkerStatsFields[i];
    char* at = reinterpret_cast<char*>(&w) + f.offset;
    if (f.kind == StatsKind::real) {
      const double v = 100.0 + static_cast<double>(i) + 0.5;
      std::memcpy(at, &v, sizeof v);
    } else if (f.kind == StatsKind::integer && f.size == sizeof(int32_t)) {
      const int32_t v = 100 + static_cast<int32_t>(i);
      std::memcpy(at, &v, sizeof v);
    } else if (f.kind == StatsKind::integer) {
      const int64_t v = 100 + static_cast<int64_t>(i);
      std::memcpy(at, &v, sizeof v);
    }
  }
  std::strcpy(w.host, "node-7");
  std::strcpy(w.device, "cuda:1 (H100)");
  w.sync_mode = 0;
  return w;
}

double shown_in_lua(const WorkerStats& w, const StatsField& f) {
  return stats_number(w, f) + (f.one_based_in_lua ? 1 : 0);
}

// The string keys of the table at the top of L's stack, with their values as text.
std::map<std::string, std::string> fields_of(lua_State* L) {
  std::map<std::string, std::string> out;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pushvalue(L, -2);
    const std::string key = lua_tostring(L, -1);
    lua_pop(L, 1);
    out[key] = lua_type(L, -1) == LUA_TNUMBER ? std::to_string(lua_tonumber(L, -1)) : lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_table_declares_every_member_of_worker_stats) {
  std::set<std::string> names;
  std::vector<const StatsField*> by_offset;
  for (const StatsField& f : kWorkerStatsFields) {
    BOOST_TEST(names.insert(f.name).second, "field " << f.name << " declared twice");
    by_offset.push_back(&f);
    BOOST_TEST(((f.shown & (kShownInTrace | kShownInRelaxedTrace | kShownInBucketTrace)) != 0) ==
                   (f.trace_format != nullptr),
               f.name << ": a trace format exactly when the trace shows it");
    BOOST_TEST((f.console_column > 0) == (f.console_header != nullptr), f.name << ": a header for a printed column");
    if (f.console_column > 0) BOOST_TEST((f.shown & kShownInConsole) != 0u, f.name << " printed but not in the console");
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto a, auto b) { return a->offset < b->offset; });
  // Between two declared fields only alignment padding: a member left out of the
  // table leaves a gap at least as wide as its alignment.
  size_t end = 0;
  for (const StatsField* f : by_offset) {
    const size_t align = f->kind == StatsKind::text ? 1 : f->size;
    BOOST_TEST(f->offset >= end, f->name << " overlaps the field before it");
    BOOST_TEST(f->offset - end < align, "an undeclared member of WorkerStats before " << f->name);
    end = f->offset + f->size;
  }
  BOOST_TEST(sizeof(WorkerStats) - end < alignof(WorkerStats), "an undeclared member at the end of WorkerStats");
}

BOOST_AUTO_TEST_CASE(each_policy_field_reaches_the_policy_stats_table) {
  TempDir dir("stats-fields-policy");
  // The policy hands back its worker's fields as the reason: key=value;...
  const std::string f = dir.write("p.lua", R"(
    return {
      init = function(cluster) end,
      step = function(stats)
        local keys = {}
        for k, v in pairs(stats.workers[2]) do keys[#keys + 1] = k .. '=' .. (type(v) == 'number' and string.format('%.17g', v) or v) end
        table.sort(keys)
        return { local_batch = {1, 1}, reason = table.concat(keys, ';') }
      end })");
  PolicySandbox box(f, {1000.0, 32.0});
  // Two workers, a global batch of 2, batches 1..2, the devices' labels.
  PolicyCluster cluster;
  cluster.workers = 2;
  cluster.global_batch = 2;
  cluster.min_batch = {1, 1};
  cluster.max_batch = {2, 2};
  cluster.devices = {"cpu", "gpu-label"};
  box.init(cluster);
  const WorkerStats w = distinct_stats();
  const PolicyAnswer a = box.step(0, 2, {w, w});
  std::map<std::string, std::string> got;
  for (size_t at = 0; at < a.reason.size();) {
    const size_t end = std::min(a.reason.find(';', at), a.reason.size());
    const std::string kv = a.reason.substr(at, end - at);
    got[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    at = end + 1;
  }
  // Numbered by position and named by the cluster's label, not by the report.
  BOOST_TEST(got["rank"] == "1");
  BOOST_TEST(got["device"] == "gpu-label");
  for (const StatsField& field : kWorkerStatsFields) {
    if (!(field.shown & kShownToPolicy)) {
      if (std::string(field.name) != "rank" && std::string(field.name) != "device")
        BOOST_TEST(got.count(field.name) == 0u, field.name << " reached the policy, which should not see it");
      continue;
    }
    BOOST_TEST_REQUIRE(got.count(field.name) == 1u, field.name << " did not reach the policy");
    char want[40];
    std::snprintf(want, sizeof want, "%.17g", shown_in_lua(w, field));
    BOOST_TEST(got[field.name] == want, field.name);
  }
}

BOOST_AUTO_TEST_CASE(each_console_field_reaches_the_console_row_and_columns) {
  LuaState lua;
  lua_State* L = lua;
  const WorkerStats w = distinct_stats();
  push_console_worker(L, w);
  const std::map<std::string, std::string> row = fields_of(L);
  lua_pop(L, 1);
  size_t shown = 0;
  for (const StatsField& f : kWorkerStatsFields) {
    if (!(f.shown & kShownInConsole)) {
      BOOST_TEST(row.count(f.name) == 0u, f.name << " reached the console, which should not show it");
      continue;
    }
    ++shown;
    BOOST_TEST_REQUIRE(row.count(f.name) == 1u, f.name << " did not reach the console");
    const std::string want =
        f.kind == StatsKind::text ? std::string(stats_text(w, f)) : std::to_string(shown_in_lua(w, f));
    BOOST_TEST(row.at(f.name) == want, f.name);
  }
  BOOST_TEST(row.size() == shown);

  // workers() prints these columns, in this order, as it always has (the class
  // column is repl.lua's own).
  push_console_columns(L);
  std::string columns;
  for (int i = 1; i <= static_cast<int>(lua_objlen(L, -1)); ++i) {
    lua_rawgeti(L, -1, i);
    lua_rawgeti(L, -1, 2);
    lua_rawgeti(L, -2, 3);
    columns += std::string(lua_tostring(L, -2)) + (lua_isnil(L, -1) ? "" : std::string(" ") + lua_tostring(L, -1)) + ",";
    lua_pop(L, 3);
  }
  lua_pop(L, 1);
  BOOST_TEST(columns ==
             "rank,host,device,batch %d,compute_ms %.2f,comm_ms %.2f,idle_ms %.2f,samples/s %.0f,memory_mb %.1f,micro %d,");
}

BOOST_AUTO_TEST_CASE(each_trace_field_reaches_trace_jsonl_in_its_order_and_bytes) {
  TempDir dir("stats-fields-trace");
  WorkerStats bsp;
  bsp.rank = 0;
  bsp.local_batch = 32;
  bsp.data_ms = 0.5;
  bsp.compute_ms = 12.25;
  bsp.real_compute_ms = 6.125;
  bsp.idle_ms = 1.0 / 3.0;
  bsp.comm_ms = 2.0;
  bsp.stats_ms = 0.01;
  bsp.optimizer_ms = 0.75;
  bsp.step_ms = 16.0;
  bsp.samples_per_s = 2612.24;
  bsp.loss_sum = 73.6;
  bsp.correct = 9;
  bsp.memory_mb = 12.3;
  bsp.speed = 0.5;
  WorkerStats relaxed = bsp;
  relaxed.rank = 1;
  relaxed.loss_sum = std::nan("");
  relaxed.sync_mode = 1;
  relaxed.steps = 4;
  relaxed.pushes = 3;
  relaxed.staleness = 1.25;
  relaxed.group = 1;
  WorkerStats bucketed = bsp;  // its gradients summed in buckets (gradient_buckets.hpp)
  bucketed.rank = 2;
  bucketed.buckets = 5;
  bucketed.allreduce_ms = 3.5;
  {
    TraceWriter trace(dir.file("trace.jsonl"));
    IterationRecord r;
    trace.write(r, {bsp, relaxed, bucketed});
  }
  std::ifstream in(dir.file("trace.jsonl"));
  std::string line;
  std::getline(in, line);
  // The bytes the trace has always had for these stats.
  const std::string workers =
      R"("workers":[{"rank":0,"local_batch":32,"micro_batches":1,"data_ms":0.5000,"compute_ms":12.2500,"real_compute_ms":6.1250,)"
      R"("idle_ms":0.3333,"comm_ms":2.0000,"stats_ms":0.0100,"optimizer_ms":0.7500,"step_ms":16.0000,)"
      R"("samples_per_s":2612.2,"loss_sum":73.6,"correct":9,"memory_mb":12.30,"speed":0.5},)"
      R"({"rank":1,"local_batch":32,"micro_batches":1,"data_ms":0.5000,"compute_ms":12.2500,"real_compute_ms":6.1250,)"
      R"("idle_ms":0.3333,"comm_ms":2.0000,"stats_ms":0.0100,"optimizer_ms":0.7500,"step_ms":16.0000,)"
      R"("samples_per_s":2612.2,"loss_sum":null,"correct":9,"memory_mb":12.30,"speed":0.5,)"
      R"("steps":4,"pushes":3,"staleness":1.25,"group":1},)"
      R"({"rank":2,"local_batch":32,"micro_batches":1,"data_ms":0.5000,"compute_ms":12.2500,"real_compute_ms":6.1250,)"
      R"("idle_ms":0.3333,"comm_ms":2.0000,"allreduce_ms":3.5000,"buckets":5,"stats_ms":0.0100,"optimizer_ms":0.7500,)"
      R"("step_ms":16.0000,"samples_per_s":2612.2,"loss_sum":73.6,"correct":9,"memory_mb":12.30,"speed":0.5}])";
  CHECK_CONTAINS(line, workers);

  // And every field the table gives the trace is there, in the table's order.
  const auto j = nlohmann::ordered_json::parse(line);  // keys in the order written
  for (int k = 0; k < 3; ++k) {
    const WorkerStats& w = k == 2 ? bucketed : k ? relaxed : bsp;
    std::vector<std::string> want, got;
    for (const StatsField& f : kWorkerStatsFields)
      if ((f.shown & kShownInTrace) || (w.sync_mode != 0 && (f.shown & kShownInRelaxedTrace)) ||
          (w.buckets > 0 && (f.shown & kShownInBucketTrace)))
        want.push_back(f.name);
    for (const auto& item : j["workers"][k].items()) got.push_back(item.key());
    BOOST_TEST(got == want, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_SUITE_END()  // test_worker_stats_fields
