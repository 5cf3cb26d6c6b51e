#include "engine/train/trace.hpp"

#include <spdlog/fmt/fmt.h>

#include "engine/core/error.hpp"

namespace tandem {

TraceWriter::TraceWriter(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {
  if (!file_) TANDEM_FAIL_HINT("check the run directory is writable", "cannot open trace file '", path, "'");
}

TraceWriter::~TraceWriter() {
  if (file_) std::fclose(file_);
}

void TraceWriter::write(const IterationRecord& r) {
  fmt::print(file_,
             "{{\"event\":\"iteration\",\"iteration\":{},\"epoch\":{},\"global_batch\":{},\"lr\":{:.6g},"
             "\"loss\":{:.6g},\"correct\":{},\"data_ms\":{:.4f},\"compute_ms\":{:.4f},\"optimizer_ms\":{:.4f},"
             "\"step_ms\":{:.4f},\"wall_s\":{:.4f}}}\n",
             r.iteration, r.epoch, r.global_batch, r.lr, r.loss, r.correct, r.data_ms, r.compute_ms, r.optimizer_ms,
             r.step_ms, r.wall_s);
}

void TraceWriter::write(const EvalRecord& r) {
  fmt::print(file_,
             "{{\"event\":\"eval\",\"iteration\":{},\"epoch\":{:.4f},\"test_loss\":{:.6g},\"test_accuracy\":{:.6g},"
             "\"eval_ms\":{:.3f},\"train_s\":{:.4f}}}\n",
             r.iteration, r.epoch, r.test_loss, r.test_accuracy, r.eval_ms, r.train_s);
}

void TraceWriter::flush() { std::fflush(file_); }

}  // namespace tandem
