#include "engine/cli/usage.hpp"

#include <algorithm>
#include <cstdio>

namespace tandem::cli {

namespace {

const Option kDryRun = {"--dry-run", "", "load and check the experiment, print it resolved (and the mpirun line), exit"};
const Option kPrintConfig = {"--print-config", "", "the same as --dry-run"};
const Option kOverwrite = {"--overwrite", "", "write into --out DIR even if an earlier run's files are there"};
const Option kOut = {"--out", "DIR", "the run directory (out_dir=DIR); refused if an earlier run is there"};
const Option kLogLevel = {"--log-level", "LEVEL", "trace, debug, info (default), warn, error or off (log_level=LEVEL)"};

std::vector<Command> make_commands() {
  return {
      {"run", "EXPERIMENT.lua [key=value ...] [options]\n       tandem run --resume RUN_DIR [key=value ...] [options]",
       "train as an experiment says (on N local ranks, or hosts, through mpirun)",
       "Train as the experiment says. key=value overrides a setting without editing the file\n"
       "(dotted keys reach into tables: stop.epochs=3 schedule.kind=cosine). With workers = N > 1\n"
       "tandem starts N ranks through mpirun (on this machine, or on --hostfile/--host); under\n"
       "your own `mpirun -np N tandem run ...` it runs as those ranks. The run directory\n"
       "(default runs/<name>-<timestamp>) gets config.json, log.txt, trace.jsonl,\n"
       "trace.perfetto.json, summary.json, calibration.json, checkpoints/ and repl.sock.\n"
       "Checkpoints: checkpoint.every=ITERATIONS (or every_s=SECONDS), keep=K.\n"
       "Ctrl-C stops every worker after the current iteration (exit status 130).\n"
       "--resume RUN_DIR with --workers N goes on with another number of workers (after losing\n"
       "one, say): the global batch stays, the plan is decided again for the new cluster.",
       "experiment file",
       true,
       {{"--workers", "N", "train on N workers (workers=N)"},
        kOut,
        kOverwrite,
        {"--hostfile", "FILE", "start the ranks on the hosts of an OpenMPI hostfile (hostfile=FILE)"},
        {"--host", "LIST", "start the ranks on these hosts, e.g. a:2,b:2 (hosts=LIST)"},
        kLogLevel,
        {"--repl", "", "this terminal becomes a Lua prompt into the running job (see attach)"},
        {"--elastic", "", "restart a job whose rank died or hung from its newest checkpoint"},
        {"--resume", "RUN_DIR", "continue RUN_DIR's run from its newest good checkpoint (with its config.json)"},
        kDryRun,
        kPrintConfig}},
      {"sim", "EXPERIMENT.lua [key=value ...] [options]",
       "run the experiment's policy against a simulated cluster",
       "Run the experiment's policy against a simulated cluster (the emulation settings over\n"
       "this machine's calibration, sim.* for noise and the network) instead of training;\n"
       "writes the same trace and summary as a run, and prints the run directory.",
       "experiment file",
       true,
       {{"--workers", "N", "simulate N workers (workers=N)"},
        kOut,
        kOverwrite,
        kLogLevel,
        {"--dry-run", "", "load and check the experiment, print it resolved, exit"},
        kPrintConfig}},
      {"profile", "EXPERIMENT.lua [key=value ...] [--out FILE]",
       "measure this device's compute for the experiment's model",
       "Measure this device's compute for the model by local batch (device=cuda for a GPU)\n"
       "and write it as a Lua table: a measured device for emulation and sim.",
       "experiment file",
       true,
       {{"--out", "FILE", "write the table to FILE (default: standard output)"}}},
      {"sample", "EXPERIMENT.lua init_from=FILE [key=value ...] [options]",
       "text from a trained language model (nanoGPT's sample.py)",
       "Text from a language model (model = 'gpt'): the experiment's model with init_from's\n"
       "weights (a run's params.safetensors, or Hugging Face's GPT-2 model.safetensors), a prompt,\n"
       "and --tokens more drawn one at a time (temperature 0: always the most likely). A byte\n"
       "vocabulary's prompt is text (--prompt); GPT-2's takes --prompt-tokens and prints ids.\n"
       "Each token is a forward pass of a data.seq_len window (no key-value cache).",
       "experiment file",
       true,
       {{"--prompt", "TEXT", "the prompt's bytes (a byte vocabulary; default a newline)"},
        {"--prompt-tokens", "IDS", "the prompt as token ids, comma-separated (15496,11,995)"},
        {"--tokens", "N", "how many tokens to draw (default 100)"},
        {"--temperature", "T", "softmax temperature (default 0.8; 0: the arg-max)"},
        {"--top-k", "K", "draw among the K most likely (default 200; 0: all)"},
        {"--seed", "S", "the draws' seed (default the experiment's seed)"},
        {"--logits", "FILE", "write the prompt's logits, [positions, vocab] float32, as .npy"},
        kLogLevel}},
      {"attach", "RUN_DIR", "a Lua prompt into a running job",
       "A Lua prompt into a running job through the socket in its run directory (repl.sock):\n"
       "workers(), plan(), history(n), policy(), swap('boa'), set(key, value), emulate{...},\n"
       "pause(), resume(), stop(); help() lists them. Tab completes names, Up recalls earlier\n"
       "lines (kept in $XDG_DATA_HOME/tandem/history), Ctrl-C clears the line, Ctrl-D on an\n"
       "empty line detaches (the job goes on; stop() ends it).",
       "run directory",
       false,
       {}},
      {"report", "RUN_DIR [RUN_DIR ...] [options]", "an HTML report of one run or several overlaid",
       "A self-contained HTML report of one run or several overlaid (matplotlib). Its options:\n"
       "tandem report --help.",
       "run directory",
       false,
       {}},
      {"test", "FILE.lua", "run a Lua test file (tests/lua)", "Run a Lua test file (tests/lua).", "Lua file",
       false, {}},
      {"version", "", "the version, and the GPUs tandem can use",
       "Print tandem's version and the GPUs it finds (also: tandem --version).", "", false, {}},
  };
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> all = make_commands();
  return all;
}

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

std::string top_level_help() {
  std::string s = "tandem: data-parallel training for clusters whose workers run at different speeds\n\nusage: tandem COMMAND ...\n\ncommands:\n";
  for (const Command& c : commands()) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-9s %s\n", c.name.c_str(), c.summary.c_str());
    s += line;
  }
  s += "\n`tandem COMMAND --help` says more of each (tandem run --help). tandem --version prints the version.\n"
       "\nexit status: 0 success; 1 a failure (a bad experiment, a training error, a failed job);\n"
       "2 a command-line mistake; 130 stopped by Ctrl-C.\n";
  return s;
}

std::string command_help(const Command& cmd) {
  std::string s = "usage: tandem " + cmd.name + (cmd.synopsis.empty() ? "" : " " + cmd.synopsis) + "\n\n" +
                  cmd.details + "\n\noptions:\n";
  std::vector<Option> options = cmd.options;
  options.push_back({"-h, --help", "", "show this help"});
  for (const Option& o : options) {
    const std::string left = o.name + (o.value.empty() ? "" : " " + o.value);
    char line[512];
    std::snprintf(line, sizeof line, "  %-18s %s\n", left.c_str(), o.help.c_str());
    s += line;
  }
  return s;
}

int usage_error(const std::string& msg, const Command* cmd) {
  const std::string more = cmd ? "tandem " + cmd->name + " --help" : "tandem --help";
  std::fprintf(stderr, "tandem: %s\n(%s shows the usage)\n", msg.c_str(), more.c_str());
  return kExitUsage;
}

std::string unknown_command(const std::string& name) {
  std::vector<std::string> names;
  for (const Command& c : commands()) names.push_back(c.name);
  const std::string near = nearest(name, names);
  return "unknown command '" + name + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)");
}

}  // namespace tandem::cli
