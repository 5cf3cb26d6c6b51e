#pragma once
// The per-iteration trace, one JSON object a line (JSON Lines), written by rank 0.
// Lines are formatted with fmt rather than built as JSON documents: the trace is
// written every iteration and must cost microseconds, not a share of the step.
#include <cstdint>
#include <cstdio>
#include <string>

namespace tandem {

struct IterationRecord {
  int64_t iteration = 0;
  int64_t epoch = 0;
  int64_t global_batch = 0;
  double lr = 0.0;
  double loss = 0.0;  // mean over the global batch
  int64_t correct = 0;
  double data_ms = 0.0, compute_ms = 0.0, optimizer_ms = 0.0, step_ms = 0.0;
  double wall_s = 0.0;
};

struct EvalRecord {
  int64_t iteration = 0;
  double epoch = 0.0;
  double test_loss = 0.0, test_accuracy = 0.0;
  double eval_ms = 0.0;
  double train_s = 0.0;  // training time so far, evaluations excluded
};

class TraceWriter {
public:
  explicit TraceWriter(const std::string& path);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  void write(const IterationRecord& r);
  void write(const EvalRecord& r);
  void flush();

private:
  std::FILE* file_;
};

}  // namespace tandem
