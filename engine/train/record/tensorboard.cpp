#include "engine/train/record/tensorboard.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "engine/core/host_name.hpp"
#include "engine/core/error.hpp"

namespace tandem {

namespace {

// The reflected Castagnoli polynomial, one table of 256 entries.
std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

// Protobuf wire format: varints, and fields keyed (number << 3 | wire type).
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}
template <typename T>
void put_fixed(std::string& out, T v) {  // little-endian, as on every machine tandem runs on
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}


double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  static const std::array<uint32_t, 256> table = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t bytes) {
  const uint32_t c = crc32c(data, bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& run_dir, int64_t flush_every, int64_t total, bool fresh)
    : flush_every_(std::max<int64_t>(flush_every, 1)), total_(total) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(run_dir) / "tensorboard";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    TANDEM_FAIL_HINT("make the run directory writable, or set tensorboard = false", "cannot create '", dir.string(),
                     "' for the TensorBoard events: ", ec.message());
  // A new run in an earlier run's directory (--overwrite) replaces its curves, as it
  // does its trace; a resumed run adds a file beside them.
  if (fresh)
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) fs::remove(e.path(), ec);
  path_ = (dir / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(unix_now())) + "." + host_name() +
                  "." + std::to_string(::getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    TANDEM_FAIL_HINT("make the run directory writable, or set tensorboard = false", "cannot open '", path_,
                     "' for writing: ", std::strerror(errno));
  write_event(0, {}, "brain.Event:2");
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::iteration(const IterationRecord& r, const std::vector<WorkerStats>& workers,
                                  const SyncRecord* sync, int64_t targets) {
  // As tools/report computes them: a relaxed-sync segment's samples are its global
  // batches', over the segment's time; the ideal is the workers' own throughputs summed.
  const int64_t covers = sync ? sync->iterations : 1;
  const double samples = static_cast<double>(r.global_batch * covers);
  const double span_ms = sync ? sync->segment_ms : r.step_ms;
  double ideal = 0.0;  // samples/s
  for (const WorkerStats& w : workers)
    if (w.local_batch > 0 && w.compute_ms > 0) ideal += static_cast<double>(w.local_batch) / w.compute_ms * 1000.0;
  const double predictions = static_cast<double>(std::max<int64_t>(r.global_batch * targets, 1));
  scalars_.clear();
  scalars_.emplace_back("train/loss", r.loss);
  scalars_.emplace_back("train/accuracy", static_cast<double>(r.correct) / predictions);
  scalars_.emplace_back("train/lr", r.lr);
  if (span_ms > 0) {
    scalars_.emplace_back("throughput/samples_per_s", samples / (span_ms / 1000.0));
    if (ideal > 0) scalars_.emplace_back("throughput/efficiency", samples / ideal / (span_ms / 1000.0));
  }
  for (const WorkerStats& w : workers) {
    const std::string p = "workers/" + std::to_string(w.rank) + "/";
    scalars_.emplace_back(p + "compute_ms", w.compute_ms);
    scalars_.emplace_back(p + "idle_ms", w.idle_ms);
    scalars_.emplace_back(p + "local_batch", static_cast<double>(w.local_batch));
  }
  write_event(r.iteration, scalars_);
  if ((r.iteration + 1) % flush_every_ == 0 || r.iteration + 1 == total_) flush();
}

void TensorBoardWriter::eval(const EvalRecord& r) {
  write_event(r.iteration, {{"test/loss", r.test_loss}, {"test/accuracy", r.test_accuracy}});
  flush();
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0)
    TANDEM_FAIL_HINT("free space on that disk, or set tensorboard = false", "cannot write '", path_,
                     "': ", std::strerror(errno));
}

void TensorBoardWriter::write_event(int64_t step, const Scalars& scalars, const std::string& file_version) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_key(v, 2, 5);  // simple_value: float, fixed32
    put_fixed(v, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string event;
  put_key(event, 1, 1);  // wall_time: double, fixed64
  put_fixed(event, unix_now());
  put_key(event, 2, 0);  // step: int64, varint
  put_varint(event, static_cast<uint64_t>(step));
  if (!file_version.empty()) put_bytes(event, 3, file_version);
  if (!scalars.empty()) put_bytes(event, 5, summary);
  write_record(event);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string frame;
  const uint64_t length = data.size();
  put_fixed(frame, length);
  put_fixed(frame, masked_crc32c(frame.data(), sizeof length));
  frame += data;
  put_fixed(frame, masked_crc32c(data.data(), data.size()));
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size())
    TANDEM_FAIL_HINT("free space on that disk, or set tensorboard = false", "cannot write '", path_,
                     "': ", std::strerror(errno));
}

}  // namespace tandem
