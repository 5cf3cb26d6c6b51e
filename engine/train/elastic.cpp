#include "engine/train/elastic.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/dist/abort_note.hpp"
#include "engine/dist/host_probe.hpp"
#include "engine/train/checkpoint/file.hpp"
#include "engine/train/elastic_slots.hpp"
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

// How long mpirun may take to end a job after a rank aborted it. Across hosts it
// may never end while a host it cannot reach holds part of the job.
constexpr double kAbortGraceS = 5;

// The aborting ranks' notes of one job (engine/dist/abort_note.hpp), oldest first.
std::vector<json> abort_notes(const std::string& note_dir) {
  std::vector<std::pair<timespec, json>> found;
  if (DIR* d = opendir(note_dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string path = note_dir + "/" + e->d_name;
      struct stat st {};
      if (e->d_name[0] == '.' || ::stat(path.c_str(), &st) != 0) continue;
      std::ifstream in(path);
      std::string line;
      std::getline(in, line);
      const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) found.emplace_back(st.st_mtim, j);
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first.tv_sec != b.first.tv_sec ? a.first.tv_sec < b.first.tv_sec : a.first.tv_nsec < b.first.tv_nsec;
  });
  std::vector<json> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

// Why the job failed, from the first aborting rank's note; else from mpirun's status.
std::string failure_cause(const std::string& note_dir, int status) {
  const std::vector<json> notes = abort_notes(note_dir);
  if (!notes.empty())
    return fmt::format("the job failed: rank {} on {} aborted it: {}", notes[0].value("rank", -1),
                       notes[0].value("host", std::string("?")), notes[0].value("why", std::string("?")));
  return fmt::format("the job failed: mpirun exit status {} (its log names the rank)", status);
}

// Ends mpirun when it outlives a rank's abort by kAbortGraceS.
class HungJobGuard {
public:
  explicit HungJobGuard(std::string note_dir) : note_dir_(std::move(note_dir)) {}
  void check(int pid) {
    if (!noted_at_ && !abort_notes(note_dir_).empty()) noted_at_ = clock_.elapsed_ms() / 1000.0;
    if (ended_ || !noted_at_ || clock_.elapsed_ms() / 1000.0 - *noted_at_ <= kAbortGraceS) return;
    log::warn("mpirun still runs {:g} s after a rank aborted the job (a host it cannot reach?): ending it",
                 kAbortGraceS);
    kill(-pid, SIGKILL);  // mpirun leads a process group: it and all it started here
    ended_ = true;
  }

private:
  std::string note_dir_;
  Stopwatch clock_;
  std::optional<double> noted_at_;
  bool ended_ = false;
};

// The hosts the job may use now: the hostfile and hosts settings read again (the
// hostfile may have changed), or `before` while the hostfile cannot be read (being
// rewritten, say).
std::vector<HostSlots> listed_hosts(const ExperimentConfig& cfg, const std::vector<HostSlots>& before) {
  try {
    return job_hosts(cfg.hostfile, cfg.hosts);
  } catch (const Error& e) {
    log::warn("elastic: {}; keeping the hosts read before", e.what());
    return before;
  }
}

// What tells a rewritten hostfile: its time stamp to the nanosecond, size and inode
// (a rewrite within a second, or by renaming a new file over it).
std::string file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return fmt::format("{}.{}:{}:{}", st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_size, st.st_ino);
}

// How often hosts listed but not in the job are asked again, the hostfile unchanged:
// an operator may list a host before it is up.
constexpr double kReprobeS = 30;

// Hosts listed again while the job runs on fewer workers than the first job: the
// listed hosts the job does not use that answer a probe. Empty when none.
std::vector<HostSlots> returning_hosts(const ExperimentConfig& cfg, const std::vector<HostSlots>& running) {
  std::vector<HostSlots> fresh;
  for (const HostSlots& h : listed_hosts(cfg, running)) {
    bool used = false;
    for (const HostSlots& r : running) used = used || r.name == h.name;
    if (!used) fresh.push_back(h);
  }
  return fresh.empty() ? fresh : responding_hosts(fresh, cfg.elastic.probe_timeout_s);
}

// What one job did, as the supervisor watched it.
struct JobEnd {
  int status = 0;
  std::optional<double> training_at;  // when a resumed job recorded an iteration past its checkpoint
  std::vector<HostSlots> returned;    // hosts back in the hostfile, for which the job was stopped
};

// Waits for the job; while it runs, notes when the resumed job trains again (its
// trace was rewritten, trimmed to the checkpoint, and shows an iteration past
// `after`), and, when the job runs short of its first size, watches the hostfile for
// hosts that return: the job is then stopped gracefully (a final checkpoint, no
// iteration lost) to be restarted with them.
JobEnd watch_job(const JobLauncher& launcher, int pid, const ExperimentConfig& cfg, const std::string& run_dir,
                 const std::string& note_dir, int64_t after, const Stopwatch& clock, const std::vector<HostSlots>& hosts, bool short_of_first) {
  JobEnd end;
  const std::string trace = run_dir + "/trace.jsonl";
  const ino_t before = inode_of(trace);
  const bool watch_hosts = short_of_first && !cfg.hostfile.empty() && cfg.checkpoint.final;
  std::string listed = watch_hosts ? file_stamp(cfg.hostfile) : "";
  double probed_at = clock.elapsed_ms() / 1000.0;
  HungJobGuard hung(note_dir);
  int64_t looks = 0;
  while (launcher.running(pid)) {
    if (!hosts.empty()) hung.check(pid);
    // Every 5th look (0.1 s): the trace may be long, and rank 0 may share this host.
    if (after >= 0 && !end.training_at && ++looks % 5 == 0 && inode_of(trace) != before &&
        trace_progress(run_dir).last > after)
      end.training_at = clock.elapsed_ms() / 1000.0;
    if (watch_hosts && end.returned.empty() &&
        (file_stamp(cfg.hostfile) != listed || clock.elapsed_ms() / 1000.0 - probed_at > kReprobeS)) {
      listed = file_stamp(cfg.hostfile);
      end.returned = returning_hosts(cfg, hosts);  // blocks up to probe_timeout_s
      probed_at = clock.elapsed_ms() / 1000.0;
      if (!end.returned.empty()) {
        log::info("elastic: host(s) {} back in {}: the job stops after this iteration and restarts with them",
                     host_list(end.returned), cfg.hostfile);
        launcher.stop(pid);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  end.status = launcher.wait(pid);
  return end;
}

std::string stop_reason(const std::string& run_dir) {
  const json s = json::parse(read_text_file(run_dir + "/summary.json"), nullptr, /*allow_exceptions=*/false);
  return s.is_object() ? s.value("stop_reason", "") : "";
}

// summary.json gains the restarts (the last job wrote the rest of it).
void record_in_summary(const std::string& run_dir, const json& restarts, const ElasticConfig& cfg) {
  const std::string path = run_dir + "/summary.json";
  json s = json::parse(read_text_file(path), nullptr, /*allow_exceptions=*/false);
  if (!s.is_object()) return;  // a job that failed before writing one
  s["elastic"] = {{"restarts", restarts}, {"max_restarts", cfg.max_restarts}, {"min_workers", cfg.min_workers}};
  write_text_file(path, s.dump(2) + "\n");
}

// After a failure, the cluster of the next job: the listed hosts that answer a probe
// (a host that failed is left out, one listed again is taken back; slots on a host
// that works are reused), as many workers as the first job had where they fit.
// `cause` gains the hosts left out.
std::vector<HostSlots> surviving_hosts(const ExperimentConfig& cfg, const std::vector<HostSlots>& hosts,
                                       std::string* cause) {
  std::vector<std::string> why_not;
  const std::vector<HostSlots> live = responding_hosts(listed_hosts(cfg, hosts), cfg.elastic.probe_timeout_s, &why_not);
  if (!why_not.empty()) {
    std::string gone;
    for (const std::string& w : why_not) gone += (gone.empty() ? "" : "; ") + w;
    *cause += "; left out: " + gone;
  }
  return live;
}

// The hosts after some returned: those listed that the job used or that returned,
// in the hostfile's order.
std::vector<HostSlots> with_returned(const ExperimentConfig& cfg, const std::vector<HostSlots>& hosts,
                                     const std::vector<HostSlots>& returned) {
  std::vector<HostSlots> next;
  for (const HostSlots& h : listed_hosts(cfg, hosts)) {
    auto named = [&](const HostSlots& o) { return o.name == h.name; };
    if (std::any_of(hosts.begin(), hosts.end(), named) || std::any_of(returned.begin(), returned.end(), named))
      next.push_back(h);
  }
  return next;
}

}  // namespace

std::string note_aborts_in(const std::string& run_dir) {
  const std::string notes = run_dir + "/abort-notes";
  ::mkdir(notes.c_str(), 0755);
  // A folder per job, named by when it starts: the ranks of an earlier job, orphaned on
  // a host cut off, write into theirs.
  static int jobs = 0;
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string dir = notes + "/job-" + std::to_string(ms) + "-" + std::to_string(++jobs);
  TANDEM_CHECK_HINT(::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST, "check the run directory's disk",
                    "cannot make the folder for the job's abort notes '", dir, "': ", std::strerror(errno));
  setenv(kAbortNoteVar, dir.c_str(), /*overwrite=*/1);  // mpirun's ranks inherit it
  return dir;
}

int wait_job(const JobLauncher& launcher, int pid, const std::string& note_dir) {
  HungJobGuard hung(note_dir);
  while (launcher.running(pid)) {
    hung.check(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return launcher.wait(pid);
}

int run_elastic(const ExperimentConfig& cfg, const std::string& run_dir, const std::vector<std::string>& first_args,
                const JobLauncher& launcher) {
  const Stopwatch clock;
  TANDEM_CHECK_HINT(cfg.elastic.min_workers <= cfg.workers, "lower elastic.min_workers, or ask for more workers",
                    "elastic.min_workers (", cfg.elastic.min_workers, ") is more than the job's ",
                    log::counted(cfg.workers, "worker"));
  const std::vector<HostSlots> first_hosts = job_hosts(cfg.hostfile, cfg.hosts);
  const int first_workers = cfg.workers;
  const json resolved = json::parse(cfg.resolved_json, nullptr, /*allow_exceptions=*/false);
  std::vector<HostSlots> hosts = first_hosts;
  int workers = first_workers;
  std::vector<std::string> args = first_args;
  if (!first_hosts.empty()) {  // a host already down would hang mpirun's start
    std::string down;
    hosts = surviving_hosts(cfg, first_hosts, &down);
    workers = std::min(first_workers, total_slots(hosts));
    TANDEM_CHECK_HINT(workers >= cfg.elastic.min_workers && workers > 0, "bring the hosts up, or list others",
                      "elastic: cannot start: ", log::counted(workers, "worker"), " on the hosts that answer, elastic.min_workers = ",
                      cfg.elastic.min_workers, down);
    if (workers < first_workers) {
      log::warn("elastic: starting on {} of {}{}", log::counted(workers, "worker"), first_workers, down);
      args.push_back("workers=" + std::to_string(workers));
      for (const std::string& o : per_slot_overrides(resolved, first_hosts, first_workers, hosts, workers))
        args.push_back(o);
    }
  }
  json restarts = json::array();
  int64_t failures = 0;
  int64_t resumed_at = -1;  // the checkpoint the running job resumed from
  for (;;) {
    const std::string note_dir = note_aborts_in(run_dir);
    const int pid = launcher.start(workers, args, hosts);
    const JobEnd end =
        watch_job(launcher, pid, cfg, run_dir, note_dir, resumed_at, clock, hosts, workers < first_workers);
    const double ended_at = clock.elapsed_ms() / 1000.0;
    if (!restarts.empty()) {  // what the last restart cost, now that its job ran
      json& last = restarts.back();
      if (end.training_at) last["restart_s"] = *end.training_at - last["failed_at_s"].get<double>();
      append_line(run_dir + "/trace.jsonl", {{"event", "restart_cost"}, {"iteration", resumed_at},
                                             {"restart", restarts.size()}, {"restart_s", last.value("restart_s", -1.0)}});
    }
    const bool rescale = end.status == 0 && !end.returned.empty() && !signalled() &&
                         access((run_dir + "/summary.json").c_str(), R_OK) == 0 && stop_reason(run_dir) == "interrupted";
    if (!rescale && (end.status == 0 || interrupted() || signalled())) {
      record_in_summary(run_dir, restarts, cfg.elastic);
      return end.status == 0 && interrupted() ? 130 : end.status;
    }
    std::string cause = failure_cause(note_dir, end.status);
    std::vector<HostSlots> next = hosts;
    if (rescale) {
      cause = "host(s) " + host_list(end.returned) + " back in the hostfile";
      next = with_returned(cfg, hosts, end.returned);
    } else {
      if (++failures > cfg.elastic.max_restarts) {
        log::error("elastic: {}; not restarted: elastic.max_restarts = {}, all made", cause,
                      cfg.elastic.max_restarts);
        return end.status;
      }
      if (!first_hosts.empty()) next = surviving_hosts(cfg, hosts, &cause);
    }
    const int next_workers = first_hosts.empty() ? first_workers : std::min(first_workers, total_slots(next));
    if (next_workers < cfg.elastic.min_workers) {
      log::error("elastic: {}; not restarted: {} left, elastic.min_workers = {}", cause, log::counted(next_workers, "worker"),
                    cfg.elastic.min_workers);
      return end.status == 0 ? 1 : end.status;
    }
    // The one the resumed job will take (it checks the model too, and sets aside
    // those that fail).
    const auto loaded = load_latest_checkpoint(checkpoint_dir(run_dir), {}, nullptr);
    if (!loaded) {
      log::error("elastic: {}; not restarted: no checkpoint passes the checks yet (checkpoint.every or "
                    "checkpoint.every_s: the first is due before the failure)", cause);
      return end.status == 0 ? 1 : end.status;
    }
    const int64_t checkpoint = loaded->state.iteration;
    const TraceProgress p = trace_progress(run_dir);
    json mark = {{"event", "restart"},
                 {"iteration", checkpoint},
                 {"restart", restarts.size() + 1},
                 {"cause", cause},
                 {"lost_iterations", std::max<int64_t>(0, p.last + 1 - checkpoint)},
                 {"workers", next_workers},
                 {"failed_at_s", ended_at}};
    if (!next.empty()) mark["hosts"] = host_list(next);
    append_line(run_dir + "/trace.jsonl", mark);
    restarts.push_back(mark);
    log::warn("elastic: {}; restart {} ({}): resuming from the checkpoint at iteration {} on {}{}; {} to run "
                 "again", cause, restarts.size(),
                 rescale ? "not a failure" : fmt::format("failure {} of at most {}", failures, cfg.elastic.max_restarts),
                 checkpoint, log::counted(next_workers, "worker"), next.empty() ? "" : " (" + host_list(next) + ")",
                 log::counted(mark["lost_iterations"].get<int64_t>(), "iteration"));
    args = {"--resume", run_dir, "workers=" + std::to_string(next_workers)};
    if (!first_hosts.empty())
      for (const std::string& o : per_slot_overrides(resolved, first_hosts, first_workers, next, next_workers))
        args.push_back(o);
    hosts = next;
    workers = next_workers;
    resumed_at = checkpoint;
  }
}

}  // namespace tandem
