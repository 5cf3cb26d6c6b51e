#include "engine/train/elastic.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/train/checkpoint/file.hpp"
#include "engine/train/interrupt.hpp"
#include "engine/train/record/run_dir.hpp"

namespace tandem {

namespace {

using json = nlohmann::json;

// The trace's iteration lines: how many, and the last iteration.
struct TraceProgress {
  int64_t lines = 0, last = -1;
};

TraceProgress trace_progress(const std::string& run_dir) {
  TraceProgress p;
  std::ifstream in(run_dir + "/trace.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || j.value("event", "") != "iteration" || !j["iteration"].is_number_integer()) continue;
    ++p.lines;
    p.last = std::max(p.last, j["iteration"].get<int64_t>());
  }
  return p;
}

void append_line(const std::string& path, const json& j) {
  std::ofstream out(path, std::ios::app);
  out << j.dump() << "\n";
  TANDEM_CHECK_HINT(out.good(), "check the run directory's disk", "cannot write the restart mark to '", path, "'");
}

ino_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Waits for the job; while it runs, notes when the resumed job trains again: its
// trace was rewritten (trimmed to the checkpoint, a new file) and shows an
// iteration past `after`. Returns the exit status.
int wait_watching(const JobLauncher& launcher, int pid, const std::string& run_dir, int64_t after,
                  std::optional<double>* training_at, const Stopwatch& clock) {
  if (after < 0) return launcher.wait(pid);
  const std::string trace = run_dir + "/trace.jsonl";
  const ino_t before = inode_of(trace);
  while (launcher.running(pid)) {
    if (!*training_at && inode_of(trace) != before && trace_progress(run_dir).last > after)
      *training_at = clock.elapsed_ms() / 1000.0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return launcher.wait(pid);
}

// summary.json gains the restarts (the last job wrote the rest of it).
void record_in_summary(const std::string& run_dir, const json& restarts, const ElasticConfig& cfg) {
  const std::string path = run_dir + "/summary.json";
  json s = json::parse(read_text_file(path), nullptr, /*allow_exceptions=*/false);
  if (!s.is_object()) return;  // a job that failed before writing one
  s["elastic"] = {{"restarts", restarts}, {"max_restarts", cfg.max_restarts}, {"min_workers", cfg.min_workers}};
  write_text_file(path, s.dump(2) + "\n");
}

}  // namespace

int run_elastic(const ExperimentConfig& cfg, const std::string& run_dir, const std::vector<std::string>& first_args,
                const JobLauncher& launcher) {
  const Stopwatch clock;
  const int workers = static_cast<int>(cfg.workers);
  std::vector<std::string> args = first_args;
  json restarts = json::array();
  int64_t resumed_at = -1;  // the checkpoint the running job resumed from
  for (;;) {
    const int pid = launcher.start(workers, args, job_hosts(cfg.hostfile, cfg.hosts));
    std::optional<double> training_at;
    const int status = wait_watching(launcher, pid, run_dir, resumed_at, &training_at, clock);
    const double ended_at = clock.elapsed_ms() / 1000.0;
    if (!restarts.empty()) {  // what the last restart cost, now that its job ran
      json& last = restarts.back();
      if (training_at) last["restart_s"] = *training_at - last["failed_at_s"].get<double>();
      append_line(run_dir + "/trace.jsonl", {{"event", "restart_cost"}, {"iteration", resumed_at},
                                             {"restart", restarts.size()}, {"restart_s", last.value("restart_s", -1.0)}});
    }
    if (status == 0 || interrupted()) {
      record_in_summary(run_dir, restarts, cfg.elastic);
      return status == 0 && interrupted() ? 130 : status;
    }
    const std::string cause = fmt::format("the job failed: mpirun exit status {} (its log names the rank)", status);
    if (static_cast<int64_t>(restarts.size()) >= cfg.elastic.max_restarts) {
      spdlog::error("elastic: {}; not restarted: elastic.max_restarts = {} restart(s) already made", cause,
                    cfg.elastic.max_restarts);
      return status;
    }
    if (workers < cfg.elastic.min_workers) {
      spdlog::error("elastic: {}; not restarted: {} worker(s) left, elastic.min_workers = {}", cause, workers,
                    cfg.elastic.min_workers);
      return status;
    }
    // The one the resumed job will take (it checks the model too, and sets aside
    // those that fail).
    const auto loaded = load_latest_checkpoint(checkpoint_dir(run_dir), {}, nullptr);
    if (!loaded) {
      spdlog::error("elastic: {}; not restarted: no checkpoint passes the checks yet (checkpoint.every or "
                    "checkpoint.every_s: the first is due before the failure)", cause);
      return status;
    }
    const int64_t checkpoint = loaded->state.iteration;
    const TraceProgress p = trace_progress(run_dir);
    json mark = {{"event", "restart"},
                 {"iteration", checkpoint},
                 {"restart", restarts.size() + 1},
                 {"cause", cause},
                 {"lost_iterations", std::max<int64_t>(0, p.last + 1 - checkpoint)},
                 {"workers", workers},
                 {"failed_at_s", ended_at}};
    append_line(run_dir + "/trace.jsonl", mark);
    restarts.push_back(mark);
    spdlog::warn("elastic: {}; restart {} of at most {}: resuming from the checkpoint at iteration {} on {} "
                 "worker(s) ({} iteration(s) since it run again)", cause, restarts.size(), cfg.elastic.max_restarts,
                 checkpoint, workers, mark["lost_iterations"].get<int64_t>());
    args = {"--resume", run_dir};
    resumed_at = checkpoint;
  }
}

}  // namespace tandem
