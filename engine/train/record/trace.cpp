#include "engine/train/record/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>

#include "engine/core/error.hpp"
#include "engine/train/worker_stats_fields.hpp"

namespace tandem {

namespace {
// A loss as JSON: the shortest text that reads back to the same double (so runs can
// be compared bitwise: a resumed run against an uninterrupted one); a diverged loss
// is NaN or infinite, which JSON cannot hold.
std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

}  // namespace

std::string clipped_reason(const std::string& reason) {
  if (reason.size() <= kMaxReasonBytes) return reason;
  static const std::string kMark = "\xe2\x80\xa6";  // "…", counted in the limit
  size_t cut = kMaxReasonBytes - kMark.size();
  // Back to the start of a character: never leave half of a multi-byte one.
  while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) --cut;
  return reason.substr(0, cut) + kMark;
}

namespace {

// A failed write names the file: fmt::print's own error ("cannot write to file: No
// space left on device") said neither which file nor what to do.
[[noreturn]] void fail_writing(const std::string& path, int err) {
  TANDEM_FAIL_HINT("free space on that disk (df -h), or give the run a directory on another one (--out DIR or "
                   "out_dir=...); a run that wrote checkpoints continues with tandem run --resume RUN_DIR",
                   "cannot write the run's file '", path, "': ", std::strerror(err));
}

// Writes are buffered: a full disk may show here or only at the next flush.
void write_or_fail(std::FILE* f, const std::string& text, const std::string& path) {
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) fail_writing(path, errno);
}

std::FILE* open_or_fail(const std::string& path, const char* mode = "w") {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (!f) TANDEM_FAIL_HINT("check the run directory is writable", "cannot open trace file '", path, "'");
  return f;
}

// Keeps the lines of a trace from before a resume: iterations below rerecord_from,
// evaluations up to resume_at (one at resume_at ran before the checkpoint was
// written). Written to a temporary file and renamed: a crash here loses nothing.
void trim_trace(const std::string& path, int64_t resume_at, int64_t rerecord_from) {
  std::FILE* in = std::fopen(path.c_str(), "r");
  if (!in) return;  // nothing traced yet
  std::string kept, line;
  char buf[1 << 16];
  while (std::fgets(buf, sizeof buf, in)) {
    line += buf;
    if (line.back() != '\n' && !std::feof(in)) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("iteration") && j["iteration"].is_number_integer()) {
      const int64_t it = j["iteration"].get<int64_t>();
      const std::string event = j.value("event", "");
      // An elastic restart's mark stays: it says why the lines after it were run twice.
      if (event.rfind("restart", 0) == 0 || (event == "eval" ? it <= resume_at : it < rerecord_from)) kept += line;
    }
    line.clear();
  }
  std::fclose(in);
  const std::string tmp = path + ".trimming";
  std::FILE* out = open_or_fail(tmp);
  const bool written = std::fwrite(kept.data(), 1, kept.size(), out) == kept.size();
  if (std::fclose(out) != 0 || !written || std::rename(tmp.c_str(), path.c_str()) != 0)
    TANDEM_FAIL_HINT("check free disk space", "cannot rewrite the trace '", path, "' for the resumed run");
}

std::FILE* open_trace(const std::string& path, int64_t resume_at, int64_t rerecord_from) {
  if (resume_at < 0) return open_or_fail(path);
  trim_trace(path, resume_at, rerecord_from < 0 ? resume_at : rerecord_from);
  return open_or_fail(path, "a");
}
}  // namespace

TraceWriter::TraceWriter(const std::string& path, int64_t resume_at, int64_t rerecord_from)
    : path_(path), file_(open_trace(path, resume_at, rerecord_from)) {}

TraceWriter::~TraceWriter() { std::fclose(file_); }

void TraceWriter::write(const IterationRecord& r, const std::vector<WorkerStats>& workers,
                        const PolicyReport* policy, const SyncRecord* sync) {
  line_.clear();
  auto out = std::back_inserter(line_);
  fmt::format_to(out,
                 "{{\"event\":\"iteration\",\"iteration\":{},\"epoch\":{:.4f},\"global_batch\":{},\"lr\":{},"
                 "\"loss\":{},\"correct\":{},\"step_ms\":{:.4f},\"wall_s\":{:.4f},\"workers\":[",
                 r.iteration, r.epoch, r.global_batch,
                 std::isfinite(r.lr) ? fmt::format("{:.6g}", r.lr) : std::string("null"), json_number(r.loss),
                 r.correct, r.step_ms, r.wall_s);
  for (size_t i = 0; i < workers.size(); ++i) {
    line_ += i ? ",{" : "{";
    write_worker(workers[i]);
    line_ += '}';
  }
  line_ += "]";
  if (sync) {
    nlohmann::json j{{"mode", sync->mode},
                     {"iterations", sync->iterations},
                     {"updates", sync->updates},
                     {"applied", sync->applied},
                     {"dropped", sync->dropped},
                     {"staleness_mean", std::round(sync->staleness_mean * 1e4) / 1e4},
                     {"staleness_max", sync->staleness_max},
                     {"server_busy_ms", std::round(sync->server_busy_ms * 1e4) / 1e4},
                     {"segment_ms", std::round(sync->segment_ms * 1e4) / 1e4}};
    if (!sync->groups.empty()) j["groups"] = sync->groups;
    line_ += ",\"sync\":" + j.dump();
  }
  if (policy && policy->event != "idle") {
    // Rare enough (one small object) to build as JSON: the reason needs escaping.
    nlohmann::json p{{"policy", policy->policy},   {"event", policy->event},
                     {"from_iteration", policy->from_iteration}, {"applies_from", policy->applies_from},
                     {"cost_ms", std::round(policy->cost_ms * 1e4) / 1e4},
                     {"wait_ms", std::round(policy->wait_ms * 1e4) / 1e4}};
    if (!policy->reason.empty()) p["reason"] = clipped_reason(policy->reason);
    if (policy->failed) p["failed"] = true;
    if (!policy->plan.empty()) p["plan"] = policy->plan;
    if (!policy->sync.empty() && policy->sync != "bsp") p["sync"] = policy->sync;
    if (!policy->metrics.empty()) {
      nlohmann::json m = nlohmann::json::object();
      for (const auto& [name, value] : policy->metrics) m[name] = value;
      p["metrics"] = m;
    }
    line_ += ",\"policy\":" + p.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  line_ += "}\n";
  write_or_fail(file_, line_, path_);
}

// The worker's fields the trace shows (worker_stats_fields.hpp), in their order; a
// relaxed-sync segment's add its steps, pushes, staleness and group.
void TraceWriter::write_worker(const WorkerStats& w) {
  auto out = std::back_inserter(line_);
  const unsigned shown = kShownInTrace | (w.sync_mode != 0 ? kShownInRelaxedTrace : 0u) |
                         (w.buckets > 0 ? kShownInBucketTrace : 0u);
  bool first = true;
  for (const StatsField& f : kWorkerStatsFields) {
    if (!(f.shown & shown)) continue;
    fmt::format_to(out, first ? "\"{}\":" : ",\"{}\":", f.name);
    first = false;
    if (f.kind == StatsKind::integer) {
      fmt::format_to(out, fmt::runtime(f.trace_format), stats_integer(w, f));
    } else {
      const double v = stats_number(w, f);
      if (std::strcmp(f.trace_format, "{}") == 0)
        line_ += json_number(v);
      else
        fmt::format_to(out, fmt::runtime(f.trace_format), v);
    }
  }
}

void TraceWriter::write(const EvalRecord& r) {
  const std::string line = fmt::format(
      "{{\"event\":\"eval\",\"iteration\":{},\"epoch\":{:.4f},\"test_loss\":{:.6g},\"test_accuracy\":{:.6g},"
      "\"eval_ms\":{:.3f},\"train_s\":{:.4f}}}\n",
      r.iteration, r.epoch, r.test_loss, r.test_accuracy, r.eval_ms, r.train_s);
  write_or_fail(file_, line, path_);
}

// A full disk shows here (writes are buffered): at the latest one progress line after
// it happens, not at the end of the run.
void TraceWriter::flush() {
  if (std::fflush(file_) != 0 || std::ferror(file_)) fail_writing(path_, errno);
}

ChromeTrace::ChromeTrace(const std::string& path, int workers) : path_(path), file_(open_or_fail(path)) {
  text_ = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  const char* groups[] = {"compute", "gradient sync (idle, comm)", "host (data, optimizer)",
                          "gradient buckets (all-reduce during the backward pass)"};
  auto out = std::back_inserter(text_);
  for (int pid = 0; pid < 4; ++pid) {
    fmt::format_to(out,
                   "{}\n{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":\"{}\"}}}}"
                   ",\n{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}",
                   pid ? "," : "", pid, groups[pid], pid, pid);
    for (int r = 0; r < workers; ++r)
      fmt::format_to(out,
                     ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":"
                     "\"worker {}\"}}}}",
                     pid, r, r);
  }
  flush();
}

namespace {
constexpr char kChromeClosing[] = "\n]}\n";
constexpr size_t kChromeFlushBytes = size_t{1} << 20;  // at most this much held in memory
}  // namespace

ChromeTrace::~ChromeTrace() {
  try {
    flush();
  } catch (const std::exception&) {
    // A destructor must not throw: the file keeps what its last flush wrote.
  }
  std::fclose(file_);
}

void ChromeTrace::flush() {
  text_ += kChromeClosing;
  write_or_fail(file_, text_, path_);
  if (std::fflush(file_) != 0 || std::ferror(file_)) fail_writing(path_, errno);
  // The next events go where the closing is now.
  std::fseek(file_, -static_cast<long>(sizeof kChromeClosing - 1), SEEK_END);
  text_.clear();
}

namespace {
// A time in tenths of a microsecond, the file's resolution: both ends of a span are
// rounded, never its duration, so spans that touch still touch after rounding.
int64_t tenths_of_us(double ms) { return std::llround(ms * 1e4); }
}  // namespace

void ChromeTrace::span(const char* name, Track track, const WorkerStats& s, double start_ms, double end_ms) {
  // (Measured times never lie before the clock's origin; the guard keeps the text a number.)
  const int64_t from = std::max<int64_t>(tenths_of_us(start_ms), 0), to = tenths_of_us(end_ms);
  if (to <= from) return;
  if (text_.size() > kChromeFlushBytes) flush();
  fmt::format_to(std::back_inserter(text_),
                 ",\n{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{}.{},\"dur\":{}.{},"
                 "\"args\":{{\"iteration\":{},\"local_batch\":{}}}}}",
                 name, name, static_cast<int>(track), s.rank, from / 10, from % 10, (to - from) / 10, (to - from) % 10,
                 s.iteration, s.local_batch);
}

// Where the phases lie (see the header): compute ends at compute_end_ms, the sync
// starts at sync_start_ms and the optimizer runs when it ends. Stats without those
// times (relaxed segments' means, tandem sim) lay their phases end to end.
void ChromeTrace::add(const WorkerStats& s) {
  const bool measured = s.compute_end_ms > 0.0 && s.sync_start_ms > 0.0;
  const double data_end = s.start_ms + s.data_ms;
  const double compute_end = measured ? s.compute_end_ms : data_end + s.compute_ms;
  const double sync_start = measured ? s.sync_start_ms : compute_end;
  const double idle_end = sync_start + s.idle_ms, comm_end = idle_end + s.comm_ms;
  span("data", kHost, s, s.start_ms, data_end);
  span("compute", kCompute, s, compute_end - s.compute_ms, compute_end);
  span("idle", kSync, s, sync_start, idle_end);
  span("comm", kSync, s, idle_end, comm_end);
  span("optimizer", kHost, s, comm_end, comm_end + s.optimizer_ms);
  if (s.buckets > 0) span("allreduce", kBuckets, s, s.buckets_start_ms, s.buckets_start_ms + s.allreduce_ms);
}

}  // namespace tandem
