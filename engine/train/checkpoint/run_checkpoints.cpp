#include "engine/core/log.hpp"
#include "engine/train/checkpoint/run_checkpoints.hpp"


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "engine/core/error.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

namespace {

constexpr size_t kTraceMargin = 64ull << 20;  // room for the trace and log besides the checkpoints

std::vector<float> to_host(Device& dev, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) dev.copy_to_host(out.data(), t.data(), out.size());
  return out;
}

// The sizes a checkpoint of this model must have, checked before anything is
// allocated from the file's numbers.
CheckpointExpect expect_of(const Model& model) {
  CheckpointExpect e;
  e.model = model.summary();
  e.param_count = static_cast<int64_t>(model.param_count());
  e.layer_state_count = static_cast<int64_t>(model.layer_state().size());
  return e;
}

}  // namespace

Checkpointer::Checkpointer(const CheckpointConfig& cfg, const std::string& run_dir, Model& model,
                           Optimizer& optimizer)
    : cfg_(cfg), dir_(checkpoint_dir(run_dir)), model_(model), optimizer_(optimizer) {}

bool Checkpointer::due(int64_t done, double train_ms) const {
  if (done <= last_iteration_) return false;
  // A multiple of `every` passed since the last one: a relaxed-sync segment can end
  // past it (its length follows the server's updates), not only on it.
  const int64_t since = std::max<int64_t>(last_iteration_, 0);
  if (cfg_.every > 0 && done / cfg_.every > since / cfg_.every) return true;
  return cfg_.every_s > 0 && train_ms - last_ms_ >= cfg_.every_s * 1000.0;
}

size_t Checkpointer::bytes() const {
  const size_t state = optimizer_.state().size() * model_.param_count();
  return (model_.param_count() + state) * sizeof(float) + model_.layer_state().size() * sizeof(double);
}

void Checkpointer::write(CheckpointState s, const std::function<void()>& midway) {
  Device& dev = model_.device();
  s.model = model_.summary();
  s.param_count = static_cast<int64_t>(model_.param_count());
  s.params = to_host(dev, model_.params());
  s.velocity.clear();
  for (Tensor* t : optimizer_.state()) {
    const std::vector<float> part = to_host(dev, *t);
    s.velocity.insert(s.velocity.end(), part.begin(), part.end());
  }
  s.optimizer_steps = optimizer_.steps();
  s.layer_state = model_.layer_state();
  write_checkpoint(dir_, s, cfg_.keep, midway);
  last_iteration_ = s.iteration;
  last_ms_ = s.train_ms;
  log::info("checkpoint {} written (iteration {})", checkpoint_path(dir_, s.iteration), s.iteration);
}

void Checkpointer::check_disk() const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec)
    TANDEM_FAIL_HINT("choose a writable run directory (out_dir=...) or free the disk",
                     "cannot create the checkpoint directory '", dir_, "': ", ec.message());
  // A real write, flushed: a read-only mount or a full disk shows here, not hours later.
  const std::string probe = dir_ + "/.probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const char byte = 0;
  const bool ok = fd >= 0 && ::write(fd, &byte, 1) == 1 && ::fsync(fd) == 0;
  const int saved = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  if (!ok)
    TANDEM_FAIL_HINT("choose a writable run directory (out_dir=...) or free the disk",
                     "the run directory cannot be written ('", probe, "': ", std::strerror(saved), ")");
  struct statvfs st {};
  if (::statvfs(dir_.c_str(), &st) != 0) return;  // no numbers: the write above is all we can check
  const double free_mb = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize) / (1 << 20);
  const double each_mb = static_cast<double>(bytes()) / (1 << 20);
  const double need_mb = enabled() ? each_mb * static_cast<double>(cfg_.keep + 1) + kTraceMargin / (1 << 20)
                                   : static_cast<double>(kTraceMargin) / (1 << 20);
  if (free_mb < need_mb)
    TANDEM_FAIL_HINT("free disk space, lower checkpoint.keep, or choose another run directory (out_dir=...)",
                     "not enough free space for the run in '", dir_, "': ", static_cast<int64_t>(free_mb),
                     " MB free, ", static_cast<int64_t>(need_mb), " MB needed (",
                     enabled() ? std::to_string(cfg_.keep + 1) + " checkpoints of " +
                                     std::to_string(static_cast<int64_t>(each_mb + 0.5)) + " MB and "
                               : std::string(),
                     kTraceMargin >> 20, " MB for the trace)");
}

CheckpointState resume_from(const std::string& run_dir, Model& model, Optimizer& optimizer, Comm& comm) {
  const std::string dir = checkpoint_dir(run_dir);
  const CheckpointExpect expect = expect_of(model);
  char chosen[4096] = {0};
  std::string rejections;
  if (comm.rank() == 0) {
    std::vector<std::string> why;
    if (const auto loaded = load_latest_checkpoint(dir, expect, &why)) {
      TANDEM_CHECK(loaded->path.size() < sizeof chosen, "checkpoint path too long: ", loaded->path);
      std::memcpy(chosen, loaded->path.c_str(), loaded->path.size());
      // The rejected ones newer than it leave the set (renamed, kept for a look):
      // counted among the newest `keep`, they would push the good ones out.
      for (const std::string& path : list_checkpoints(dir)) {
        if (path <= loaded->path) break;
        std::error_code ec;
        std::filesystem::rename(path, path + ".rejected", ec);
        log::warn("checkpoint {} set aside as {}.rejected", path, path);
      }
    }
    // Temporary files of writes a failure cut short.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind(".writing-", 0) == 0) std::filesystem::remove(e.path(), ec);
    for (const std::string& w : why) rejections += "\n  rejected: " + w;
  }
  comm.broadcast(chosen, sizeof chosen, "choosing the checkpoint to resume from");
  if (chosen[0] == 0)
    TANDEM_FAIL_HINT("start the run afresh (without --resume), or resume a run directory that has checkpoints "
                     "(checkpoint.every or checkpoint.every_s); one written for another model or optimizer resumes "
                     "only with the experiment the run was started with",
                     "no usable checkpoint in '", dir, "'",
                     comm.rank() == 0 ? (rejections.empty() ? std::string(" (there is none)") : rejections)
                                      : std::string(" (rank 0's log says why)"));
  // Rank 0 checked it; the others read the same file and check it again (cheap).
  CheckpointState s = read_checkpoint(chosen, expect);
  // read_checkpoint checked the sizes against the model; again here, next to the
  // copies, because a size that slipped through would write past the model's memory.
  TANDEM_CHECK(s.params.size() == model.param_count() && s.layer_state.size() == model.layer_state().size(),
               "checkpoint ", chosen, " passed the reader with ", s.params.size(), " parameters and ",
               s.layer_state.size(), " values of layer state for a model of ", model.param_count(), " and ",
               model.layer_state().size(), " (a bug in tandem)");
  Device& dev = model.device();
  dev.copy_from_host(model.params().data(), s.params.data(), s.params.size());
  // The optimizer's state buffers, in order (SGD's momentum; AdamW's m then v).
  const std::vector<Tensor*> state = optimizer.state();
  TANDEM_CHECK_HINT(s.velocity.size() == state.size() * model.param_count(),
                    "resume with the optimizer (and momentum) the run was started with", "checkpoint ", chosen,
                    " holds ", s.velocity.size() / std::max<size_t>(model.param_count(), 1),
                    " optimizer state value(s) per parameter, but optimizer '", optimizer.config().name, "' keeps ",
                    state.size());
  for (size_t i = 0; i < state.size(); ++i)
    dev.copy_from_host(state[i]->data(), s.velocity.data() + i * model.param_count(), model.param_count());
  optimizer.set_steps(s.optimizer_steps);
  model.load_layer_state(s.layer_state);
  dev.synchronize();
  if (comm.rank() == 0)
    log::info("resuming from {}: iteration {}, {} then, {} now", chosen, s.iteration, log::counted(s.world, "worker"),
                 comm.size());
  return s;
}

std::string usable_pending_stats(const CheckpointState& s, int world) {
  if (s.pending_stats.empty()) return {};
  if (s.stats_record != static_cast<int64_t>(sizeof(WorkerStats)) ||
      s.pending_stats.size() != static_cast<size_t>(world) * sizeof(WorkerStats)) {
    log::info("the checkpoint's pending stats ({} bytes in records of {}) are not this build's for {} workers: "
                 "the resumed run records from its first iteration on", s.pending_stats.size(), s.stats_record, world);
    return {};
  }
  for (int r = 0; r < world; ++r) {
    WorkerStats w;
    std::memcpy(&w, s.pending_stats.data() + static_cast<size_t>(r) * sizeof w, sizeof w);
    if (!stats_record_fits(w, r, world)) {
      log::warn("the checkpoint's pending stats are left out: record {} says rank {}, group {}, sync mode {}, "
                   "valid {}, local batch {} (the file was altered); the resumed run records from its first "
                   "iteration on", r, w.rank, w.group, w.sync_mode, w.valid, w.local_batch);
      return {};
    }
  }
  return s.pending_stats;
}

}  // namespace tandem
