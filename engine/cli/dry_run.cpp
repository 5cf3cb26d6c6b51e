#include "engine/cli/dry_run.hpp"

#include <cstdio>

#include "engine/dist/hosts.hpp"
#include "engine/dist/launcher.hpp"

namespace tandem::cli {

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "_-./:=,@%+") == std::string::npos)
    return word;
  std::string s = "'";
  for (char c : word) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

int print_dry_run(const ExperimentConfig& cfg, const std::vector<std::string>* rank_args) {
  std::printf("%s\n", cfg.resolved_json.c_str());
  std::fflush(stdout);
  if (rank_args) {
    std::vector<std::string> args = {"run"};
    for (const std::string& a : *rank_args)
      if (a != "--dry-run" && a != "--print-config") args.push_back(a);
    std::string line;
    for (const std::string& w : mpirun_command(static_cast<int>(cfg.workers), args, job_hosts(cfg.hostfile, cfg.hosts)))
      line += (line.empty() ? "" : " ") + shell_quote(w);
    std::fprintf(stderr, "ranks would start with (plus out_dir=RUN_DIR, the run directory made then):\n%s\n",
                 line.c_str());
  }
  return 0;
}

}  // namespace tandem::cli
