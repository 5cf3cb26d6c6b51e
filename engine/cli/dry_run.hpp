#pragma once
// `tandem run|sim EXP --dry-run` (alias --print-config): the experiment loaded and
// checked as the run would load it, printed resolved (the JSON a run writes to
// config.json), with the mpirun command line that would start its ranks. Nothing is
// trained and no run directory is made: a way to see what overrides did, and to
// hand the mpirun line to a cluster's own scheduler.
#include <string>
#include <vector>

#include "engine/train/config.hpp"

namespace tandem::cli {

// One word for a POSIX shell: as is when it needs no quoting, else in single quotes.
std::string shell_quote(const std::string& word);

// Prints cfg.resolved_json to stdout; when `rank_args` is given (the run would start
// ranks through mpirun), the mpirun line to stderr, after "ranks would start with:".
// Returns the exit status (0).
int print_dry_run(const ExperimentConfig& cfg, const std::vector<std::string>* rank_args);

}  // namespace tandem::cli
