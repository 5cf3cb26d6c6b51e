#pragma once
// TensorBoard event files, written by rank 0 when the experiment says
// `tensorboard = true`: <run dir>/tensorboard/events.out.tfevents.<unix time>.<host>.<pid>.
//
// Debian packages no library that writes them (no tensorboard, no TensorFlow, and the
// Event/Summary .proto files are TensorFlow's), so this writes the documented format
// itself: TFRecord framing (length, masked CRC32C of the length, data, masked CRC32C
// of the data) around protobuf Event messages encoded by hand. Only the few fields a
// scalar needs are written: Event{wall_time = 1, step = 2, file_version = 3,
// summary = 5}, Summary{value = 1}, Value{tag = 1, simple_value = 2}.
//
// One event per recorded iteration (step = the iteration, as in trace.jsonl), with the
// same numbers the trace holds for it, and one per evaluation. The file is flushed at
// every progress line and evaluation, so a killed run keeps what it had logged.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "engine/train/record/trace.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

// CRC-32C (Castagnoli), as TFRecord frames use it; and TFRecord's masking of it.
uint32_t crc32c(const void* data, size_t bytes);
uint32_t masked_crc32c(const void* data, size_t bytes);

class TensorBoardWriter {
public:
  // flush_every: the progress lines' interval (log_every); total: the last iteration + 1.
  // fresh: a new run (not resumed): earlier event files in that folder are removed.
  TensorBoardWriter(const std::string& run_dir, int64_t flush_every, int64_t total, bool fresh);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // train/loss, train/accuracy, throughput/samples_per_s, throughput/efficiency and,
  // per worker, workers/<rank>/compute_ms, idle_ms, local_batch. targets: predictions
  // per sample (a language model's loss and accuracy are per token).
  void iteration(const IterationRecord& r, const std::vector<WorkerStats>& workers, const SyncRecord* sync,
                 int64_t targets);
  // test/loss, test/accuracy.
  void eval(const EvalRecord& r);
  void flush();
  const std::string& path() const { return path_; }

private:
  using Scalars = std::vector<std::pair<std::string, double>>;
  void write_event(int64_t step, const Scalars& scalars, const std::string& file_version = "");
  void write_record(const std::string& data);
  int64_t flush_every_, total_;
  std::string path_;
  std::FILE* file_ = nullptr;
  Scalars scalars_;  // reused
};

}  // namespace tandem
