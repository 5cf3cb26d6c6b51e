// `tandem run`: one process, or a job of ranks under mpirun (launched here, or by a
// user's mpirun or Slurm), new or resumed from a run directory. Errors print what
// failed, where, and what to do, and exit non-zero; nothing is trained until the
// experiment and its model have loaded and validated.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <string>
#include <vector>

#include "engine/cli/dry_run.hpp"
#include "engine/cli/options.hpp"
#include "engine/cli/usage.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/dist/comm.hpp"
#include "engine/core/cuda_device.hpp"
#include "engine/dist/launcher.hpp"
#include "engine/dist/nccl_comm.hpp"
#include "engine/script/repl.hpp"
#include "engine/script/repl_client.hpp"
#include "engine/script/console_screen.hpp"
#include "engine/train/record/run_dir.hpp"
#include "engine/train/checkpoint/file.hpp"
#include <nlohmann/json.hpp>
#include "engine/script/experiment_loader.hpp"
#include "engine/script/policy_host.hpp"
#include "engine/train/memory_check.hpp"
#include "engine/train/elastic.hpp"
#include "engine/train/interrupt.hpp"
#include "engine/train/trainer.hpp"
#include "engine/cli/commands.hpp"

namespace {

using tandem::cli::CommandLine;

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// --resume RUN_DIR: the experiment file and overrides the run was started with
// (config.json), the run directory as out_dir; overrides given now come after them
// and win.
void resume_settings(const std::string& run_dir, std::string* experiment, std::vector<std::string>* overrides) {
  const std::string path = run_dir + "/config.json";
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(tandem::read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    TANDEM_FAIL_HINT("give the run directory of an earlier tandem run", "cannot resume: '", path,
                     "' is not a run's config (", e.what(), ")");
  }
  TANDEM_CHECK_HINT(cfg.contains("source") && cfg["source"].is_string(), "give the run directory of an earlier tandem run",
                    "cannot resume: '", path, "' does not name its experiment file");
  *experiment = cfg["source"].get<std::string>();
  TANDEM_CHECK_HINT(access(experiment->c_str(), R_OK) == 0,
                    "run tandem from the directory the run was started in, or restore the experiment file",
                    "cannot resume: the run's experiment file '", *experiment, "' cannot be read");
  std::vector<std::string> merged;
  if (cfg.contains("overrides") && cfg["overrides"].is_array())
    for (const auto& o : cfg["overrides"])
      if (o.is_string() && o.get<std::string>().rfind("out_dir=", 0) != 0) merged.push_back(o.get<std::string>());
  // Injected faults happened in the run being resumed; they are not injected again
  // (and may name a rank the smaller cluster no longer has).
  merged.push_back("faults={}");
  merged.insert(merged.end(), overrides->begin(), overrides->end());
  merged.push_back("out_dir=" + run_dir);
  *overrides = merged;
}

// Why a failed job left no checkpoint: none were asked for, or it failed before
// the first was due.
std::string no_checkpoint_reason(const tandem::CheckpointConfig& c) {
  if (!c.enabled()) return "no checkpoint was written (set checkpoint.every=ITERATIONS to have them)";
  std::string due = c.every > 0 ? "iteration " + std::to_string(c.every) : "";
  if (c.every_s > 0) due += (due.empty() ? "" : " or ") + fmt::format("{:g} s of training", c.every_s);
  return "no checkpoint was written: the job failed before its first one was due (at " + due +
         "; rank 0's log says how far it got)";
}

// After a multi-rank job failed: where it stands and how to go on.
void report_failed_job(int status, const std::string& run_dir, const tandem::ExperimentConfig& cfg) {
  const int workers = cfg.workers;
  const std::vector<std::string> all = tandem::list_checkpoints(tandem::checkpoint_dir(run_dir));
  std::string checkpoint = all.empty() ? no_checkpoint_reason(cfg.checkpoint)
                                       : "none of its checkpoints passes the checks (rank 0's log says why)";
  for (const std::string& path : all) {
    try {
      const tandem::CheckpointState s = tandem::read_checkpoint(path);
      checkpoint = "the last good checkpoint is " + path + " (iteration " + std::to_string(s.iteration) + ")";
      break;
    } catch (const tandem::CheckpointRejected&) {
    }
  }
  tandem::log::error("the job failed (mpirun exited with status {}; the lines above name the rank that failed and why); "
                "{}", status, checkpoint);
  if (checkpoint.rfind("the last", 0) == 0)
    tandem::log::error("  to continue: tandem run --resume {}   (with --workers {} to go on without a lost worker; "
                  "per-worker settings such as emulation.speeds then need overrides for {} workers)", run_dir,
                  workers - 1, workers - 1);
}

// Starts the ranks through mpirun in a child and returns its pid. The child leads a
// process group of its own, so the terminal's Ctrl-C reaches only this process, which
// forwards it as a graceful stop (engine/train/interrupt.hpp).
pid_t run_ranks(int workers, const std::vector<std::string>& rank_args, const std::vector<tandem::HostSlots>& hosts) {
  const pid_t child = fork();
  TANDEM_CHECK(child >= 0, "cannot fork to start the ranks: ", std::strerror(errno));
  if (child == 0) {
    setpgid(0, 0);
    // mpirun forwards its stdin to rank 0, which reads none: it must not take the
    // prompt's keystrokes (--repl), nor stop on reading a terminal from a background
    // process group.
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    // The ranks' stderr reaches this terminal through mpirun's pipes: rank 0 draws its
    // progress bar only if told (core/log.hpp; --repl has said 0 already).
    if (::isatty(STDERR_FILENO) == 1) ::setenv("TANDEM_PROGRESS_BAR", "1", 0);
    try {
      tandem::launch_ranks(workers, std::vector<std::string>{"run"} + rank_args, hosts);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tandem: %s\n", e.what());
    }
    _exit(127);  // the child never goes on with the parent's code
  }
  return child;
}

int wait_ranks(pid_t child) {
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The launcher's side of a job of ranks: mpirun in a child (its own process group,
// Ctrl-C forwarded as a graceful stop), the prompt here when repl_dir is given, and
// with --elastic the supervisor that restarts a failed job. Returns the exit status.
int run_job(const tandem::ExperimentConfig& cfg, const std::vector<std::string>& rank_args,
            const std::string& run_dir, const std::string& repl_dir, bool elastic) {
  const tandem::JobLauncher launcher{[](int workers, const std::vector<std::string>& a,
                                        const std::vector<tandem::HostSlots>& hosts) {
                                       const pid_t pid = run_ranks(workers, a, hosts);
                                       setpgid(pid, pid);  // as the child does: whichever runs first
                                       tandem::forward_interrupts(pid);
                                       return static_cast<int>(pid);
                                     },
                                     // WNOWAIT: the job is reaped by wait, where its status is read.
                                     [](int pid) {
                                       siginfo_t info{};
                                       if (waitid(P_PID, static_cast<id_t>(pid), &info,
                                                  WEXITED | WNOHANG | WNOWAIT) != 0)
                                         return errno == EINTR;  // a signal: ask again
                                       return info.si_pid == 0;
                                     },
                                     [](int pid) {
                                       // Ended, not yet reaped: its pid cannot be reused while
                                       // the signal forwarding stops.
                                       siginfo_t info{};
                                       while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 &&
                                              errno == EINTR) {
                                       }
                                       tandem::forward_interrupts(0);
                                       return wait_ranks(pid);
                                     },
                                     [](int pid) { kill(pid, SIGUSR1); }};
  int status = 0;
  if (elastic) {
    status = tandem::run_elastic(cfg, run_dir, rank_args, launcher);
  } else {
    const std::vector<tandem::HostSlots> hosts = tandem::job_hosts(cfg.hostfile, cfg.hosts);
    const bool across_hosts = !hosts.empty() && !run_dir.empty();  // where mpirun may outlive an abort
    const std::string note_dir = across_hosts ? tandem::note_aborts_in(run_dir) : "";
    if (!repl_dir.empty()) tandem::capture_output_for_console();  // mpirun's output comes through the prompt
    const int child = launcher.start(static_cast<int>(cfg.workers), rank_args, hosts);
    if (!repl_dir.empty()) tandem::attach_console(repl_dir, [&] { return launcher.running(child); });
    status = across_hosts ? tandem::wait_job(launcher, child, note_dir) : launcher.wait(child);
  }
  if (status != 0 && status != 130) report_failed_job(status, run_dir, cfg);
  // Stopped by Ctrl-C, with its summary: the shell's convention for SIGINT.
  return status == 0 && tandem::interrupted() ? 130 : status;
}

// What is wrong with giving --resume RUN_DIR with the rest of `line`, or "".
std::string resume_conflict(const CommandLine& line) {
  if (!line.has("--resume")) return "";
  if (!line.operand.empty())
    return "--resume takes the experiment from the run directory; give no experiment file ('" + line.operand + "')";
  if (line.has("--out")) return "--resume continues in RUN_DIR itself; drop --out";
  return "";
}

}  // namespace

namespace tandem::cli {


int run_command(const std::vector<std::string>& args, int* argc, char*** argv) {
  CommandLine line;
  if (const int status = parse_or_exit("run", args, &line); status >= 0) return status;
  if (const std::string wrong = resume_conflict(line); !wrong.empty())
    return usage_error(wrong, tandem::cli::find_command("run"));
  std::string experiment = line.operand;
  std::vector<std::string> overrides = line.overrides;
  const std::string resume = line["--resume"];
  const bool repl = line.has("--repl");
  if (repl) ::setenv("TANDEM_PROGRESS_BAR", "0", 1);  // the prompt owns the terminal's last line (core/log.hpp)
  const bool elastic = line.has("--elastic");
  options_as_overrides(line, &overrides);
  if (!resume.empty()) resume_settings(resume, &experiment, &overrides);
  auto load = [&] {
    tandem::ExperimentConfig c = tandem::load_experiment(experiment, overrides);
    c.resume = !resume.empty();
    return c;
  };

  // Under an mpirun of the user's, every rank prints what it would train, and none trains.
  if (dry_run(line) && tandem::launched_by_mpi()) return tandem::cli::print_dry_run(load(), nullptr);

  // --repl: this terminal becomes the console's prompt. The run directory is fixed
  // here so the prompt knows where the console's socket will be.
  std::string repl_dir;
  std::thread repl_client;
  std::atomic<bool> training{true};
  if (!tandem::launched_by_mpi()) {
    // --hostfile/--host without --workers: a worker per slot, as mpirun does.
    if (const int slots = tandem::slots_given(overrides)) overrides.push_back("workers=" + std::to_string(slots));
    // Loaded here first so a broken experiment fails once, before any rank starts.
    const tandem::ExperimentConfig cfg = load();
    if (resume.empty() && !line.has("--overwrite") && !dry_run(line)) tandem::check_no_earlier_run(cfg.out_dir);
    const int slots = tandem::total_slots(tandem::job_hosts(cfg.hostfile, cfg.hosts));
    // Before any rank starts, or this process allocates its model.
    tandem::record_free_gpu_memory();
    tandem::check_model_memory(cfg, cfg.workers, /*started_by_mpirun=*/false);
    if (!cfg.policy.file.empty()) tandem::check_policy(cfg, cfg.workers);
    TANDEM_CHECK_HINT(!(elastic && repl), "leave out --repl; attach a console with tandem attach RUN_DIR",
                      "--elastic and --repl do not go together: the supervisor's terminal shows the restarts");
    TANDEM_CHECK_HINT(!elastic || cfg.checkpoint.enabled(),
                      "set checkpoint.every=ITERATIONS (or checkpoint.every_s=SECONDS) with --elastic",
                      "--elastic restarts a failed job from its newest checkpoint, but this run writes none");
    std::vector<std::string> rank_args = args;
    rank_args.erase(std::remove(rank_args.begin(), rank_args.end(), std::string("--elastic")), rank_args.end());
    // The run directory is fixed here when the prompt needs its socket, or when
    // several ranks run (after a failure this process says where things stand).
    const bool job = cfg.workers > 1 || elastic || slots > 0;
    if (dry_run(line)) return tandem::cli::print_dry_run(cfg, job ? &rank_args : nullptr);
    if (repl || (job && resume.empty())) {
      TANDEM_CHECK_HINT(!repl || cfg.console, "leave console = true (the default) to use --repl",
                        "--repl needs the run's console, but the experiment sets console = false");
      repl_dir = tandem::make_run_dir(cfg.out_dir, cfg.name);
      overrides.push_back("out_dir=" + repl_dir);
      rank_args.erase(std::remove(rank_args.begin(), rank_args.end(), std::string("--repl")), rank_args.end());
      rank_args.push_back("out_dir=" + repl_dir);
    }
    const std::string run_dir = resume.empty() ? repl_dir : resume;
    if (job) return run_job(cfg, rank_args, run_dir, repl ? repl_dir : "", elastic);
    if (repl)
      repl_client = std::thread([&] { tandem::attach_console(repl_dir, [&] { return training.load(); }); });
  }
  struct JoinClient {
    std::thread& t;
    std::atomic<bool>& training;
    ~JoinClient() {
      training = false;
      if (t.joinable()) t.join();
    }
  } join_client{repl_client, training};
  if (tandem::launched_by_mpi()) tandem::listen_for_forwarded_interrupt();
  auto comm = tandem::make_world_comm(argc, argv);
  tandem::log::init(comm->rank(), "info");
  tandem::ExperimentConfig cfg = load();
  tandem::log::set_level(cfg.log_level);
  if (cfg.workers != comm->size() && comm->rank() == 0 && tandem::launched_by_mpi())
    tandem::log::warn("the experiment asks for {} but mpirun started {}: training with {}", tandem::log::counted(cfg.workers, "worker"),
                 comm->size(), comm->size());
  try {
    comm->set_timeout_s(cfg.collective_timeout_s);
    // Under an mpirun of the user's, nothing checked the memory before the ranks
    // started: each checks against its host's total memory (the others may have
    // allocated already), a lenient bound but one no rank's allocation can move.
    if (tandem::launched_by_mpi()) tandem::check_model_memory(cfg, comm->size(), /*started_by_mpirun=*/true);
    // The device first: a GPU rank's gradients may then go over NCCL (every rank
    // takes part in that decision, so all ranks agree on the transport).
    const tandem::DeviceChoice device = tandem::choose_device(cfg.device, comm->rank());
    const bool on_gpu = device.device->kind() == tandem::DeviceKind::cuda;
    comm = tandem::make_gpu_world_comm(std::move(comm),
                                       tandem::my_placement(on_gpu, on_gpu ? tandem::cuda_ordinal_of(*device.device) : -1),
                                       on_gpu ? tandem::cuda_stream_of(*device.device) : nullptr);
    // Rank 0 runs the policy; the others get its plans with the gradients.
    std::unique_ptr<tandem::PolicyHost> policy;
    if (!cfg.policy.file.empty() && comm->rank() == 0)
      policy = std::make_unique<tandem::PolicyHost>(cfg.policy,
                                                    tandem::policy_cluster(cfg, comm->size(), /*measure_memory=*/true));
    // Rank 0's console (the REPL's socket in the run directory), made once it exists.
    tandem::ConsoleFactory console;
    if (cfg.console && comm->rank() == 0)
      console = [&](const std::string& run_dir) -> std::unique_ptr<tandem::Console> {
        return std::make_unique<tandem::ReplConsole>(run_dir, policy.get(), cfg.policy.budget_ms,
                                                     cfg.policy.memory_mb);
      };
    tandem::train(cfg, *comm, device, policy.get(), console);
    // The transport goes before the device: NCCL finishes its work on the device's stream.
    policy.reset();
    comm.reset();
  } catch (const std::exception& e) {
    // One rank's failure ends the whole job at once instead of leaving the others
    // waiting for it until their deadline.
    if (comm && comm->size() > 1) comm->abort(e.what());
    throw;
  }
  // A single worker stopped by Ctrl-C exits as the shell expects of SIGINT; the ranks
  // of a job exit 0 (mpirun would call another status a failure) and the launcher
  // says it.
  return tandem::interrupted() && !tandem::launched_by_mpi() ? tandem::cli::kExitInterrupted : 0;
}

}  // namespace tandem::cli
