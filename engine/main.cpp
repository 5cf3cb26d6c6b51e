// The tandem command line.
//   tandem run EXPERIMENT.lua [key=value ...] [--workers N] [--out DIR] [--log-level LEVEL] [--repl] [--elastic]
//   tandem run --resume RUN_DIR [key=value ...] [--workers N]
//   tandem test FILE.lua          run a Lua test file (tests/lua)
//   tandem version
// Errors print what failed, where, and what to do, and exit non-zero; nothing is
// trained until the experiment and its model have loaded and validated.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <set>
#include <map>
#include <string>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/core/gpu_probe.hpp"
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
#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/sim/simulator.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/emulation/calibration.hpp"
#include "engine/train/step.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/script/lua_state.hpp"
#include "engine/script/lua_test_runner.hpp"
#include "engine/script/policy_host.hpp"
#include "engine/train/control.hpp"
#include "engine/train/memory_check.hpp"
#include "engine/train/elastic.hpp"
#include "engine/train/interrupt.hpp"
#include "engine/train/trainer.hpp"

namespace {

const char* kUsage = R"(tandem: data-parallel training for clusters whose workers run at different speeds

usage:
  tandem run EXPERIMENT.lua [key=value ...] [--workers N] [--out DIR] [--log-level LEVEL] [--repl] [--elastic]
      Train as the experiment says. key=value overrides a setting without editing
      the file (dotted keys reach into tables: stop.epochs=3 schedule.kind=cosine).
      With workers = N > 1 (or --workers N) tandem starts N local ranks through
      mpirun; under your own `mpirun -np N [--hostfile H] tandem run ...` it runs
      as those ranks. The run directory (default runs/<name>-<timestamp>) gets
      config.json, log.txt, trace.jsonl, trace.perfetto.json and summary.json.
      --repl: this terminal is a Lua prompt into the running job (see attach).
      Checkpoints: checkpoint.every=ITERATIONS (or every_s=SECONDS), keep=K.
      --elastic: when a rank dies or hangs, restart the job from its newest
      checkpoint by itself (elastic.max_restarts, elastic.min_workers).
      Ctrl-C stops every worker after the current iteration (exit status 130).
  tandem run --resume RUN_DIR [key=value ...] [--workers N]
      Continue a run from the newest good checkpoint in RUN_DIR/checkpoints, with
      the experiment and overrides in RUN_DIR/config.json (plus any given now).
      --workers N: on another number of workers (after losing one, say); the global
      batch stays, the plan is decided again for the new cluster.
  tandem sim EXPERIMENT.lua [key=value ...] [--workers N] [--out DIR]
      Run the experiment's policy against a simulated cluster (the emulation
      settings over this machine's calibration, sim.* for noise and the network)
      instead of training; writes the same trace and summary as a run.
  tandem profile EXPERIMENT.lua [key=value ...] [--out FILE]
      Measure this device's compute for the model by local batch (device=cuda for
      a GPU) and write it as a Lua table: a measured device for emulation and sim.
  tandem attach RUN_DIR
      A Lua prompt into a running job through the socket in its run directory:
      workers(), plan(), history(n), policy(), swap('boa'), set(key, value),
      emulate{...}, pause(), resume(), stop(); help() lists them. Ctrl-D detaches.
  tandem report RUN_DIR [RUN_DIR ...] [--out FILE.html] [--target ACC] [--title T]
      A self-contained HTML report of one run or several overlaid (matplotlib,
      Debian's python3-matplotlib): per-worker compute/communication/idle, local
      batches with the policy's decisions, throughput against the ideal, loss and
      test accuracy against time; with several runs a comparison table.
  tandem test FILE.lua
      Run a Lua test file.
  tandem version
)";

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "tandem: %s\n\n%s", msg.c_str(), kUsage);
  return 2;
}

// The command line of run, sim and profile: one experiment file, key=value
// overrides, and options: `--name VALUE` for the names in `valued`, bare `--name`
// for those in `flags`. Returns what is wrong with it, or "" with *line filled.
struct CommandLine {
  std::string experiment;
  std::vector<std::string> overrides;
  std::map<std::string, std::string> options;  // "--out" -> its value; a flag -> ""
  bool has(const std::string& name) const { return options.count(name) != 0; }
  std::string operator[](const std::string& name) const {
    const auto it = options.find(name);
    return it == options.end() ? std::string() : it->second;
  }
};

std::string parse_command_line(const std::vector<std::string>& args, const std::set<std::string>& valued,
                               const std::set<std::string>& flags, CommandLine* line) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags.count(a)) {
      line->options[a] = "";
    } else if (valued.count(a)) {
      if (i + 1 >= args.size()) return a + " needs a value";
      line->options[a] = args[++i];
    } else if (a.rfind("--", 0) == 0) {
      return "unknown option '" + a + "'";
    } else if (a.find('=') != std::string::npos) {
      line->overrides.push_back(a);
    } else if (line->experiment.empty()) {
      line->experiment = a;
    } else {
      return "more than one experiment file given ('" + line->experiment + "' and '" + a + "')";
    }
  }
  return "";
}

// --out DIR, --workers N and --log-level L as the overrides they stand for.
void options_as_overrides(const CommandLine& line, std::vector<std::string>* overrides) {
  if (line.has("--out")) overrides->push_back("out_dir=" + line["--out"]);
  if (line.has("--log-level")) overrides->push_back("log_level=" + line["--log-level"]);
  if (line.has("--workers")) overrides->push_back("workers=" + line["--workers"]);
}

// tandem sim EXPERIMENT.lua [key=value ...] [--workers N] [--out DIR]
int cmd_sim(const std::vector<std::string>& args) {
  CommandLine line;
  const std::string wrong = parse_command_line(args, {"--out", "--workers", "--log-level"}, {}, &line);
  if (!wrong.empty()) return usage_error(wrong);
  if (line.experiment.empty()) return usage_error("sim needs an experiment file");
  options_as_overrides(line, &line.overrides);
  const tandem::ExperimentConfig cfg = tandem::load_experiment(line.experiment, line.overrides);
  tandem::log::set_level(cfg.log_level);
  tandem::check_model_memory(cfg, 1, /*started_by_mpirun=*/false);  // one model, however many simulated workers
  tandem::cpu_device().set_blas_threads(cfg.blas_threads);  // as a rank does: one BLAS thread unless asked
  // This machine's compute for the model is the emulation's reference: given by the
  // experiment (a real run's calibration.json), or measured now, as a real run does.
  auto data = tandem::make_dataset(cfg.data, /*train=*/true);
  tandem::GlobalSampler sampler(data->size(), cfg.global_batch, cfg.seed);
  tandem::Model model(tandem::cpu_device(), cfg.model, cfg.seed);
  tandem::DeviceProfile machine;
  if (cfg.emulation.calibration) {
    machine = *cfg.emulation.calibration;
  } else {
    const auto optimizer = tandem::make_optimizer(tandem::cpu_device(), model, cfg.optimizer);
    tandem::TrainStep step(model, *optimizer, cfg.accumulate);
    tandem::BatchLoader loader(*data, sampler, tandem::cpu_device());
    machine = tandem::calibrate_compute(step, loader, cfg.global_batch, model, cfg.optimizer);
  }
  std::unique_ptr<tandem::PolicyHost> policy;
  if (!cfg.policy.file.empty()) {
    policy = std::make_unique<tandem::PolicyHost>(cfg.policy, tandem::policy_cluster(cfg, cfg.workers));
    policy->wait_for_answers();  // simulated time: every decision on time, however loaded this machine
  }
  // The all-reduce carries the gradients and the control message beside them.
  const size_t allreduce_floats = model.param_count() + tandem::ControlWire(cfg.workers).floats();
  const tandem::SimSummary s =
      tandem::simulate(cfg, machine, allreduce_floats, sampler.iterations_per_epoch(), policy.get());
  std::printf("%s\n", s.run.run_dir.c_str());
  return 0;
}

// tandem profile EXPERIMENT.lua [key=value ...] [--out FILE]: this device's compute
// for the experiment's model, by local batch, as a Lua table.
int cmd_profile(const std::vector<std::string>& args) {
  CommandLine line;
  const std::string wrong = parse_command_line(args, {"--out"}, {}, &line);
  if (!wrong.empty()) return usage_error(wrong);
  if (line.experiment.empty()) return usage_error("profile needs an experiment file");
  const std::string out = line["--out"];  // a file here, not the run directory
  const tandem::ExperimentConfig cfg = tandem::load_experiment(line.experiment, line.overrides);
  tandem::log::set_level(cfg.log_level);
  tandem::check_model_memory(cfg, 1, /*started_by_mpirun=*/false);
  const tandem::DeviceChoice device = tandem::choose_device(cfg.device, 0);
  tandem::Device& dev = *device.device;
  dev.set_blas_threads(cfg.blas_threads);  // as a rank does: one BLAS thread unless asked
  auto data = tandem::make_dataset(cfg.data, /*train=*/true);
  tandem::GlobalSampler sampler(data->size(), cfg.global_batch, cfg.seed);
  tandem::Model model(dev, cfg.model, cfg.seed);
  const auto optimizer = tandem::make_optimizer(dev, model, cfg.optimizer);
  tandem::TrainStep step(model, *optimizer, cfg.accumulate);
  tandem::BatchLoader loader(*data, sampler, dev);
  const tandem::DeviceProfile p = tandem::calibrate_compute(step, loader, cfg.global_batch, model, cfg.optimizer);
  auto list = [](const std::vector<double>& v) {
    std::string s = "{ ";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt::format("{:.6g}", v[i]);
    return s + " }";
  };
  const std::string text = fmt::format(
      "-- tandem profile of {} on {} (model {}, up to local batch {}).\n"
      "-- batch: local batches; ms: forward + backward; host_ms: loading the batch + the optimizer step;\n"
      "-- memory_mb: device memory the model holds at that batch. With local p = dofile(this file):\n"
      "--   emulation.calibration = {{ batch = p.batch, ms = p.ms, host_ms = p.host_ms }}, or a measured worker:\n"
      "--   emulation.workers[i].profile = {{ batch = p.batch, ms = p.ms }}; and for memory caps\n"
      "--   emulation.memory = {{ batch = p.batch, mb = p.memory_mb }} with emulation.workers[i].memory_mb.\n"
      "return {{ batch = {}, ms = {}, host_ms = {}, memory_mb = {} }}\n",
      cfg.name, dev.name(), cfg.model.name, cfg.global_batch, list(p.batch), list(p.ms), list(p.host_ms),
      list(p.memory_mb));
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    tandem::write_text_file(out, text);
    spdlog::info("profile of {} written to {}", dev.name(), out);
  }
  return 0;
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
  spdlog::error("the job failed (mpirun exited with status {}; the lines above name the rank that failed and why); "
                "{}", status, checkpoint);
  if (checkpoint.rfind("the last", 0) == 0)
    spdlog::error("  to continue: tandem run --resume {}   (with --workers {} to go on without a lost worker; "
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
                                       return waitid(P_PID, static_cast<id_t>(pid), &info,
                                                     WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
                                     },
                                     [](int pid) {
                                       const int status = wait_ranks(pid);
                                       tandem::forward_interrupts(0);
                                       return status;
                                     },
                                     [](int pid) { kill(pid, SIGUSR1); }};
  int status = 0;
  if (elastic) {
    status = tandem::run_elastic(cfg, run_dir, rank_args, launcher);
  } else {
    const std::vector<tandem::HostSlots> hosts = tandem::job_hosts(cfg.hostfile, cfg.hosts);
    const bool across_hosts = !hosts.empty() && !run_dir.empty();  // where mpirun may outlive an abort
    if (across_hosts) tandem::note_aborts_in(run_dir);
    if (!repl_dir.empty()) tandem::capture_output_for_console();  // mpirun's output comes through the prompt
    const int child = launcher.start(static_cast<int>(cfg.workers), rank_args, hosts);
    if (!repl_dir.empty()) tandem::attach_console(repl_dir, [&] { return launcher.running(child); });
    status = across_hosts ? tandem::wait_job(launcher, child, run_dir) : launcher.wait(child);
  }
  if (status != 0 && status != 130) report_failed_job(status, run_dir, cfg);
  // Stopped by Ctrl-C, with its summary: the shell's convention for SIGINT.
  return status == 0 && tandem::interrupted() ? 130 : status;
}

// tandem report: tools/report/report.py under a Python that has matplotlib (Debian's
// python3-matplotlib installs for /usr/bin/python3, which a pyenv or venv python3
// first on PATH would not see).
int cmd_report(const std::vector<std::string>& args) {
  const std::string script = tandem::tandem_root() + "/tools/report/report.py";
  TANDEM_CHECK_HINT(access(script.c_str(), R_OK) == 0, "set TANDEM_HOME to tandem's source directory",
                    "the report tool '", script, "' is missing");
  const char* python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> cmd = {python, script};
  cmd.insert(cmd.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  TANDEM_FAIL_HINT("install python3 and python3-matplotlib (apt-get install python3-matplotlib)", "cannot run ",
                   python, ": ", std::strerror(errno));
}

int cmd_run(const std::vector<std::string>& args, int* argc, char*** argv) {
  CommandLine line;
  const std::string wrong =
      parse_command_line(args, {"--out", "--log-level", "--workers", "--resume"}, {"--repl", "--elastic"}, &line);
  if (!wrong.empty()) return usage_error(wrong);
  std::string experiment = line.experiment;
  std::vector<std::string> overrides = line.overrides;
  const std::string resume = line["--resume"];
  const bool repl = line.has("--repl");
  const bool elastic = line.has("--elastic");
  if (!resume.empty() && !experiment.empty())
    return usage_error("--resume takes the experiment from the run directory; give no experiment file ('" +
                       experiment + "')");
  if (!resume.empty() && line.has("--out")) return usage_error("--resume continues in RUN_DIR itself; drop --out");
  if (experiment.empty() && resume.empty()) return usage_error("run needs an experiment file (or --resume RUN_DIR)");
  options_as_overrides(line, &overrides);
  if (!resume.empty()) resume_settings(resume, &experiment, &overrides);
  auto load = [&] {
    tandem::ExperimentConfig c = tandem::load_experiment(experiment, overrides);
    c.resume = !resume.empty();
    return c;
  };

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
    const int slots = tandem::total_slots(tandem::job_hosts(cfg.hostfile, cfg.hosts));
    // Before any rank starts, or this process allocates its model.
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
    spdlog::warn("the experiment asks for {} worker(s) but mpirun started {}: training with {}", cfg.workers,
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
      policy = std::make_unique<tandem::PolicyHost>(cfg.policy, tandem::policy_cluster(cfg, comm->size()));
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
  return tandem::interrupted() && !tandem::launched_by_mpi() ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    tandem::log::init(0, "info");
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      std::fputs(kUsage, stdout);
      return args.empty() ? 2 : 0;
    }
    const std::string cmd = args[0];
    args.erase(args.begin());
    if (cmd == "run") return cmd_run(args, &argc, &argv);
    if (cmd == "sim") return cmd_sim(args);
    if (cmd == "report") return cmd_report(args);
    if (cmd == "profile") return cmd_profile(args);
    if (cmd == "attach") {
      if (args.size() != 1) return usage_error("attach needs the run directory of a running job");
      return tandem::attach_console(args[0], {});
    }
    if (cmd == "test") {
      if (args.size() != 1) return usage_error("test needs exactly one Lua file");
      return tandem::run_lua_test_file(args[0]);
    }
    if (cmd == "version" || cmd == "--version") {
      std::printf("tandem 0.1.0 (built %s CUDA)\n", TANDEM_HAVE_CUDA ? "with" : "without");
      const tandem::GpuProbe gpus = tandem::probe_gpus();
      for (const std::string& d : gpus.devices) std::printf("gpu: %s\n", d.c_str());
      if (gpus.devices.empty()) std::printf("gpu: none (%s); training runs on the CPU\n", gpus.reason.c_str());
      return 0;
    }
    return usage_error("unknown command '" + cmd + "'");
  } catch (const tandem::Error& e) {
    spdlog::error("{}", e.what());
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("unexpected error: {}", e.what());
    return 1;
  }
}
