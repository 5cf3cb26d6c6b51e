#pragma once
// The per-iteration trace, one JSON object a line (JSON Lines), written by rank 0:
// the iteration's global numbers and every worker's stats. Lines are formatted with
// fmt rather than built as JSON documents: the trace is written every iteration and
// must cost microseconds, not a share of the step.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/train/plan_policy.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

struct IterationRecord {
  int64_t iteration = 0;
  double epoch = 0.0;   // epochs completed after it: iterations done / iterations per epoch
  int64_t global_batch = 0;
  double lr = 0.0;       // NaN (null in the trace) where nothing trains: tandem sim
  double loss = 0.0;     // mean over the global batch; NaN (null) likewise
  int64_t correct = 0;   // over the global batch
  double step_ms = 0.0;  // the slowest worker's iteration
  double wall_s = 0.0;
};

// What a relaxed-sync segment adds to its trace line (sync/relaxed_segment.hpp): the mode and
// groups it ran, how many global batches it covered, and the server's work.
struct SyncRecord {
  std::string mode;          // SyncPlan::str()
  std::vector<int> groups;   // grouped: each rank's group (0-based)
  int64_t iterations = 1;    // global batches' worth of training
  int64_t updates = 0, applied = 0, dropped = 0;
  double staleness_mean = 0.0, staleness_max = 0.0, server_busy_ms = 0.0, segment_ms = 0.0;
  std::vector<int64_t> staleness_histogram;  // gradients applied at 0, 1, 2, ... versions behind
};

struct EvalRecord {
  int64_t iteration = 0;  // iterations done before it
  double epoch = 0.0;     // epochs completed: iteration / iterations per epoch
  double test_loss = 0.0, test_accuracy = 0.0;
  double eval_ms = 0.0;
  double train_s = 0.0;  // training time so far, evaluations excluded
};

// A policy's reason as the trace and the log keep it: at most kMaxReasonBytes, cut
// at a UTF-8 character boundary and marked with "…". A policy decides every
// iteration; one that returned 1 MB of reason per step once filled 77 MB of trace.
constexpr size_t kMaxReasonBytes = 256;
std::string clipped_reason(const std::string& reason);

class TraceWriter {
public:
  // resume_at >= 0: a resumed run: the iteration lines from `rerecord_from` on (run
  // before a failure, or recorded again from the checkpoint's pending stats: resume_at
  // or resume_at - 1) and the evaluations after resume_at are dropped, the rest
  // appended to.
  explicit TraceWriter(const std::string& path, int64_t resume_at = -1, int64_t rerecord_from = -1);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  // policy: the decision broadcast in this iteration, if a policy runs (written as
  // "policy":{...} unless nothing was asked of it).
  void write(const IterationRecord& r, const std::vector<WorkerStats>& workers, const PolicyReport* policy = nullptr,
             const SyncRecord* sync = nullptr);
  void write(const EvalRecord& r);
  void flush();

private:
  void write_worker(const WorkerStats& w);
  std::string path_;  // named when a write fails
  std::FILE* file_;
  std::string line_;  // reused buffer
};

// A Chrome / Perfetto trace-event file (open it in ui.perfetto.dev or
// chrome://tracing), so stragglers and the waits they cause are visible. Every
// worker has three tracks, one in each of three groups (trace-event processes), as
// a GPU profile shows a compute stream, a communication stream and the host:
//   compute (pid 0): the device's forward and backward;
//   gradient sync (pid 1): idle (waiting for the slowest) and comm (the all-reduce);
//   host (pid 2): data (sampling, gathering, uploading the batch) and the optimizer;
//   gradient buckets (pid 3): with comm.bucket_mb between hosts, the buckets' sums
//     from the first one's start to the last one's end, over the compute they hide
//     behind (the gradient sync track's comm is then the exposed rest).
// Spans on one track never overlap: each is placed at measured times
// (WorkerStats::compute_end_ms, sync_start_ms), not laid end to end. An emulated
// compute_ms is the modelled device's time counted from the last sync, so it may
// overlap this rank's real data loading and optimizer step: on one track, summed
// durations ran into the next iteration. Times are rounded at both ends (0.1 us)
// so that spans that touch still touch.
//
// The file is valid JSON after every flush, not only at the end: events gather in
// memory and a flush writes them followed by the closing "]}", then steps back over
// the closing so the next flush writes over it. A run killed outright (SIGKILL, a
// dead host) leaves a file that parses, missing at most what came after the last
// flush; one killed in the middle of a flush leaves its last event cut short, and a
// reader recovers the rest by cutting there and closing the array.
class ChromeTrace {
public:
  ChromeTrace(const std::string& path, int workers);
  ~ChromeTrace();  // the last flush
  ChromeTrace(const ChromeTrace&) = delete;
  ChromeTrace& operator=(const ChromeTrace&) = delete;
  void add(const WorkerStats& s);
  void flush();

private:
  enum Track { kCompute = 0, kSync = 1, kHost = 2, kBuckets = 3 };  // the trace-event pid
  void span(const char* name, Track track, const WorkerStats& s, double start_ms, double end_ms);
  std::string path_;  // named when a write fails
  std::FILE* file_;
  std::string text_;  // events since the last flush
};

}  // namespace tandem
