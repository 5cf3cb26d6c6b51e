#pragma once
// WorkerStats's fields as the run shows them, declared once. Three consumers walk
// this table instead of each keeping a list of their own: the stats table a policy's
// step(stats) gets (script/policy_sandbox.cpp), the console's workers()
// (script/repl.cpp and scripts/tandem/repl.lua) and the trace (record/trace.cpp,
// trace.jsonl). A field a consumer leaves out is left out here, by a flag, so that
// adding a field to WorkerStats is one row: the consumers it should reach follow.
//
// The rows are in trace.jsonl's key order (that file is read by tools that compare
// runs byte by byte); Lua tables have no order, and the console orders its printed
// columns by number.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "engine/train/worker_stats.hpp"

namespace tandem {

enum class StatsKind { integer, real, text };

// Who shows a field (bits of StatsField::shown).
enum StatsShown : unsigned {
  kShownToPolicy = 1u << 0,        // stats.workers[i] in a policy's step(stats)
  kShownInConsole = 1u << 1,       // a row of the console's engine.workers()
  kShownInTrace = 1u << 2,         // a worker of every trace.jsonl iteration line
  kShownInRelaxedTrace = 1u << 3,  // a worker of the lines of relaxed-sync segments only
  kShownInBucketTrace = 1u << 4,   // a worker whose gradients were summed in buckets (buckets > 0)
};

struct StatsField {
  const char* name;  // the key in every consumer
  StatsKind kind;
  size_t offset, size;
  unsigned shown;
  // fmt format of the value in trace.jsonl. A real written "{}" (the shortest text
  // that reads back to the same double) is written null when not finite, as JSON
  // has no NaN; the fixed formats are kept as they always were.
  const char* trace_format;
  bool one_based_in_lua;  // a 0-based number shown counted from 1 (Lua's lists are 1-based)
  // The console's workers() table: the column's place (0: in engine.workers() but
  // not printed), header and Lua format (null: the value as text, left-aligned).
  int console_column;
  const char* console_header;
  const char* console_format;
};

template <typename T>
constexpr StatsKind stats_kind() {
  if constexpr (std::is_array_v<T>) return StatsKind::text;
  else if constexpr (std::is_floating_point_v<T>) return StatsKind::real;
  else return StatsKind::integer;
}

#define TANDEM_STATS_FIELD(member, ...)                                                                           \
  StatsField {                                                                                                    \
    #member, stats_kind<decltype(WorkerStats::member)>(), offsetof(WorkerStats, member),                          \
        sizeof(WorkerStats::member), __VA_ARGS__                                                                  \
  }

// The policy sees no rank or device of WorkerStats: it numbers workers by position
// and names their devices as init(cluster) did (policy_sandbox.cpp), which holds even
// for a report that has not arrived. start_ms, compute_end_ms and sync_start_ms
// feed the Perfetto trace's spans;
// valid and sync_mode steer the consumers rather than being shown.
inline constexpr StatsField kWorkerStatsFields[] = {
    //                 member           shown                                                    trace     lua+1  console column
    TANDEM_STATS_FIELD(rank,            kShownInConsole | kShownInTrace,                         "{}",     false, 1, "rank", nullptr),
    TANDEM_STATS_FIELD(local_batch,     kShownToPolicy | kShownInConsole | kShownInTrace,        "{}",     false, 4, "batch", "%d"),
    TANDEM_STATS_FIELD(micro_batches,   kShownToPolicy | kShownInConsole | kShownInTrace,        "{}",     false, 11, "micro", "%d"),
    TANDEM_STATS_FIELD(data_ms,         kShownToPolicy | kShownInTrace,                          "{:.4f}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(compute_ms,      kShownToPolicy | kShownInConsole | kShownInTrace,        "{:.4f}", false, 5, "compute_ms", "%.2f"),
    TANDEM_STATS_FIELD(real_compute_ms, kShownInTrace,                                           "{:.4f}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(idle_ms,         kShownToPolicy | kShownInConsole | kShownInTrace,        "{:.4f}", false, 7, "idle_ms", "%.2f"),
    TANDEM_STATS_FIELD(comm_ms,         kShownToPolicy | kShownInConsole | kShownInTrace,        "{:.4f}", false, 6, "comm_ms", "%.2f"),
    TANDEM_STATS_FIELD(allreduce_ms,    kShownInBucketTrace,                                     "{:.4f}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(buckets,         kShownInBucketTrace,                                     "{}",     false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(stats_ms,        kShownInTrace,                                           "{:.4f}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(optimizer_ms,    kShownToPolicy | kShownInTrace,                          "{:.4f}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(step_ms,         kShownToPolicy | kShownInConsole | kShownInTrace,        "{:.4f}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(samples_per_s,   kShownToPolicy | kShownInConsole | kShownInTrace,        "{:.1f}", false, 8, "samples/s", "%.0f"),
    TANDEM_STATS_FIELD(loss_sum,        kShownInTrace,                                           "{}",     false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(correct,         kShownInTrace,                                           "{}",     false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(memory_mb,       kShownToPolicy | kShownInConsole | kShownInTrace,        "{:.2f}", false, 10, "memory_mb", "%.1f"),
    TANDEM_STATS_FIELD(speed,           kShownInConsole | kShownInTrace,                         "{:.4g}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(steps,           kShownToPolicy | kShownInRelaxedTrace,                   "{}",     false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(pushes,          kShownToPolicy | kShownInRelaxedTrace,                   "{}",     false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(staleness,       kShownToPolicy | kShownInRelaxedTrace,                   "{:.4g}", false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(group,           kShownToPolicy | kShownInRelaxedTrace,                   "{}",     true,  0, nullptr, nullptr),
    TANDEM_STATS_FIELD(grad_sq,         kShownToPolicy,                                          nullptr,  false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(iteration,       kShownInConsole,                                         nullptr,  false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(host,            kShownInConsole,                                         nullptr,  false, 2, "host", nullptr),
    TANDEM_STATS_FIELD(device,          kShownInConsole,                                         nullptr,  false, 3, "device", nullptr),
    TANDEM_STATS_FIELD(start_ms,        0,                                                       nullptr,  false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(compute_end_ms,  0,                                                       nullptr,  false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(sync_start_ms,   0,                                                       nullptr,  false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(buckets_start_ms, 0,                                                      nullptr,  false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(valid,           0,                                                       nullptr,  false, 0, nullptr, nullptr),
    TANDEM_STATS_FIELD(sync_mode,       0,                                                       nullptr,  false, 0, nullptr, nullptr),
};

#undef TANDEM_STATS_FIELD

// An integer field's value, exact.
inline int64_t stats_integer(const WorkerStats& w, const StatsField& f) {
  const char* at = reinterpret_cast<const char*>(&w) + f.offset;
  if (f.size == sizeof(int32_t)) {
    int32_t v;
    std::memcpy(&v, at, sizeof v);
    return v;
  }
  int64_t v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

// A number field's value (integers up to 2^53 exactly, as Lua holds them).
inline double stats_number(const WorkerStats& w, const StatsField& f) {
  if (f.kind != StatsKind::real) return static_cast<double>(stats_integer(w, f));
  double v;
  std::memcpy(&v, reinterpret_cast<const char*>(&w) + f.offset, sizeof v);
  return v;
}

// A text field's value, up to its first NUL (the arrays are truncated, not terminated).
inline std::string_view stats_text(const WorkerStats& w, const StatsField& f) {
  const char* at = reinterpret_cast<const char*>(&w) + f.offset;
  return std::string_view(at, strnlen(at, f.size));
}

}  // namespace tandem
