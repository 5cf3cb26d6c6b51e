#pragma once
// Elastic runs (`tandem run EXP --elastic`): the launching tandem process stays as
// the supervisor of the job it started through mpirun. When the job fails (a rank
// died: mpirun ends the job at once; a rank hung: the others name it after
// collective_timeout_s and abort), the supervisor restarts it with --resume from the
// newest checkpoint that passes every check, so at most the iterations since that
// checkpoint are lost. On one host a dead rank's slot is reused: the job restarts on
// as many workers as before, and the policy re-plans from its restored state. The
// global batch stays. Below elastic.min_workers, past elastic.max_restarts, or with
// no usable checkpoint, it stops with the reason.
//
// One run directory throughout: the trace continues (the resumed job replaces the
// lines after its checkpoint) with a {"event":"restart"} line for every restart (its
// cause, the checkpoint it went back to, the iterations lost, and what the restart
// cost), and summary.json gains "elastic" with the same list.
//
// What a restart costs: detection (immediate for a killed rank, collective_timeout_s
// for a hung one) + relaunch (mpirun, the ranks' start-up and MPI) + reload (the
// checkpoint read, the policy restored) until the resumed job records its first
// iteration; the supervisor measures the last two from the failed job's end to the
// first new iteration line in the trace (written at each progress line: log_every).
#include <functional>
#include <string>
#include <vector>

#include "engine/dist/hosts.hpp"
#include "engine/train/config.hpp"

namespace tandem {

// Starts the job with `args` (tandem run's arguments) on `workers` ranks (on `hosts`,
// or this machine when empty) and returns the pid of its mpirun; `running` says whether it still runs (without reaping it);
// `wait` returns its exit status.
struct JobLauncher {
  std::function<int(int workers, const std::vector<std::string>& args, const std::vector<HostSlots>& hosts)> start;
  std::function<bool(int pid)> running;
  std::function<int(int pid)> wait;
  // Stops the job gracefully: every rank finishes the iteration and writes its final
  // checkpoint and summary (as Ctrl-C does).
  std::function<void(int pid)> stop;
};

// Before starting a job: its aborting ranks note why in a folder of the job's own
// under RUN_DIR/abort-notes (engine/dist/abort_note.hpp), returned, which wait_job and
// run_elastic watch.
std::string note_aborts_in(const std::string& run_dir);

// Waits for a job and returns its exit status; ends mpirun when it still runs a
// grace period (5 s) after a rank aborted the job: across hosts mpirun may never end
// while a host it cannot reach holds part of the job.
int wait_job(const JobLauncher& launcher, int pid, const std::string& note_dir);

// Runs the job under the elastic rules until it succeeds, is interrupted, or cannot
// go on; returns the last job's exit status (130 when interrupted).
int run_elastic(const ExperimentConfig& cfg, const std::string& run_dir, const std::vector<std::string>& first_args,
                const JobLauncher& launcher);

}  // namespace tandem
