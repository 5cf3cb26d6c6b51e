// The tandem command line's subcommands but `run` (run_command.cpp): sim, profile,
// report, attach, sample, test, version, and the dispatch that main() calls. Their
// options, usages and help live in engine/cli/usage.cpp (one table per subcommand);
// this file does what each does.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cli/dry_run.hpp"
#include "engine/cli/options.hpp"
#include "engine/cli/sample.hpp"
#include "engine/cli/usage.hpp"
#include "engine/core/error.hpp"
#include "engine/core/gpu_probe.hpp"
#include "engine/core/log.hpp"
#include "engine/script/repl_client.hpp"
#include "engine/train/record/run_dir.hpp"
#include <nlohmann/json.hpp>
#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/model.hpp"
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
#include "engine/train/trainer.hpp"
#include "engine/cli/commands.hpp"

namespace tandem::cli {

int parse_or_exit(const std::string& name, const std::vector<std::string>& args, CommandLine* line) {
  const Command& cmd = *find_command(name);
  const std::string wrong = parse_command_line(cmd, args, line);
  if (!wrong.empty()) return usage_error(wrong, &cmd);
  if (line->help) {
    std::fputs(command_help(cmd).c_str(), stdout);
    return 0;
  }
  if (line->operand.empty() && !cmd.operand.empty() && !(name == "run" && line->has("--resume")))
    return usage_error(name + " needs " + (cmd.operand == "experiment file" ? "an " : "a ") + cmd.operand, &cmd);
  return -1;
}

void options_as_overrides(const CommandLine& line, std::vector<std::string>* overrides) {
  if (line.has("--out")) overrides->push_back("out_dir=" + line["--out"]);
  if (line.has("--log-level")) overrides->push_back("log_level=" + line["--log-level"]);
  if (line.has("--workers")) overrides->push_back("workers=" + line["--workers"]);
  if (line.has("--hostfile")) overrides->push_back("hostfile=" + line["--hostfile"]);
  if (line.has("--host")) overrides->push_back("hosts=" + line["--host"]);
}

bool dry_run(const CommandLine& line) { return line.has("--dry-run") || line.has("--print-config"); }

}  // namespace tandem::cli

namespace {

using tandem::cli::CommandLine;
using tandem::cli::dry_run;
using tandem::cli::options_as_overrides;
using tandem::cli::parse_or_exit;
using tandem::cli::usage_error;

// tandem sim EXPERIMENT.lua [key=value ...] [--workers N] [--out DIR]
int cmd_sim(const std::vector<std::string>& args) {
  CommandLine line;
  if (const int status = parse_or_exit("sim", args, &line); status >= 0) return status;
  options_as_overrides(line, &line.overrides);
  const tandem::ExperimentConfig cfg = tandem::load_experiment(line.operand, line.overrides);
  tandem::log::set_level(cfg.log_level);
  tandem::check_model_memory(cfg, 1, /*started_by_mpirun=*/false);  // one model, however many simulated workers
  if (dry_run(line)) return tandem::cli::print_dry_run(cfg, nullptr);
  if (!line.has("--overwrite")) tandem::check_no_earlier_run(cfg.out_dir);
  tandem::cpu_device().set_blas_threads(cfg.blas_threads);  // as a rank does: one BLAS thread unless asked
  // This machine's compute for the model is the emulation's reference: given by the
  // experiment (a real run's calibration.json), or measured now, as a real run does.
  // Only a measurement needs the samples themselves; the simulation needs their count
  // (read without decompressing the images, which took most of a short simulation).
  std::unique_ptr<tandem::Dataset> data;
  if (!cfg.emulation.calibration) data = tandem::make_dataset(cfg.data, /*train=*/true);
  tandem::GlobalSampler sampler(data ? data->size() : tandem::dataset_size(cfg.data, /*train=*/true),
                                cfg.global_batch, cfg.seed);
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
  // The all-reduce carries the gradients and the control message beside them; the
  // backward pass finishes the gradients layer by layer (gradient buckets).
  tandem::GradientLayout layout;
  layout.params = model.param_count();
  layout.floats = layout.params + tandem::ControlWire(cfg.workers).floats();
  layout.ready_points = model.gradient_ready_points();
  layout.backward_share = model.backward_share();
  const tandem::SimSummary s = tandem::simulate(cfg, machine, layout, sampler.iterations_per_epoch(), policy.get());
  std::printf("%s\n", s.run.run_dir.c_str());
  return 0;
}

// tandem profile EXPERIMENT.lua [key=value ...] [--out FILE]: this device's compute
// for the experiment's model, by local batch, as a Lua table.
int cmd_profile(const std::vector<std::string>& args) {
  CommandLine line;
  if (const int status = parse_or_exit("profile", args, &line); status >= 0) return status;
  const std::string out = line["--out"];  // a file here, not the run directory
  const tandem::ExperimentConfig cfg = tandem::load_experiment(line.operand, line.overrides);
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
  tandem::BatchLoader loader(*data, sampler, dev, cfg.data.on_device);
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
    tandem::log::info("profile of {} written to {}", dev.name(), out);
  }
  return 0;
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

int print_version() {
  std::printf("tandem 0.1.0 (built %s CUDA)\n", TANDEM_HAVE_CUDA ? "with" : "without");
  const tandem::GpuProbe gpus = tandem::probe_gpus();
  // The free memory as NVML reads it (the measured memory caps count it): "not read"
  // where NVML cannot be opened.
  for (size_t g = 0; g < gpus.devices.size(); ++g) {
    const double free = g < gpus.free_bytes.size() ? gpus.free_bytes[g] : 0.0;
    std::printf("gpu: %s, %s\n", gpus.devices[g].c_str(),
                free > 0 ? tandem::bytes_text(free).append(" free").c_str() : "free memory not read (no NVML)");
  }
  if (gpus.devices.empty()) std::printf("gpu: none (%s); training runs on the CPU\n", gpus.reason.c_str());
  return 0;
}

}  // namespace

namespace tandem::cli {

// The top level: `tandem COMMAND ...`, `tandem --help`, `tandem --version`.
int dispatch(std::vector<std::string> args, int* argc, char*** argv) {
  using tandem::cli::usage_error;
  if (args.empty()) {
    std::fputs(tandem::cli::top_level_help().c_str(), stderr);
    return tandem::cli::kExitUsage;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    const tandem::cli::Command* about = args.empty() ? nullptr : tandem::cli::find_command(args[0]);
    if (!args.empty() && !about) return usage_error(tandem::cli::unknown_command(args[0]));
    std::fputs((about ? tandem::cli::command_help(*about) : tandem::cli::top_level_help()).c_str(), stdout);
    return 0;
  }
  if (cmd == "--version") return print_version();
  if (cmd.rfind("-", 0) == 0) {
    const std::string near = tandem::cli::nearest(cmd, {"--help", "--version"});
    return usage_error("unknown option '" + cmd + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
  }
  if (cmd == "run") return run_command(args, argc, argv);
  if (cmd == "sim") return cmd_sim(args);
  if (cmd == "report") return cmd_report(args);
  if (cmd == "profile") return cmd_profile(args);
  if (!tandem::cli::find_command(cmd)) return usage_error(tandem::cli::unknown_command(cmd));
  CommandLine line;
  if (const int status = parse_or_exit(cmd, args, &line); status >= 0) return status;
  if (cmd == "attach") return tandem::attach_console(line.operand, {});
  if (cmd == "sample") return tandem::cli::sample(line);
  if (cmd == "test") return tandem::run_lua_test_file(line.operand);
  return print_version();
}

}  // namespace tandem::cli
