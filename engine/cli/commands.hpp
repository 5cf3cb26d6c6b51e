#pragma once
// The tandem command line's subcommands (run, sim, profile, attach, report, test,
// version). main() calls dispatch(); the rest is what the commands share.
// engine/cli/usage.cpp holds each one's options, usage and help.
#include <string>
#include <vector>

#include "engine/cli/options.hpp"

namespace tandem::cli {

// `tandem ARGS...` (args without the program name): the exit status. argc and argv
// are main()'s, for MPI_Init in a rank of a job.
int dispatch(std::vector<std::string> args, int* argc, char*** argv);

// `tandem run ARGS...` (engine/cli/run_command.cpp).
int run_command(const std::vector<std::string>& args, int* argc, char*** argv);

// Parses a subcommand's arguments by its option table (engine/cli/usage.cpp). Returns
// -1 to go on with *line filled, else the exit status: 0 after its --help, 2 after a
// usage error.
int parse_or_exit(const std::string& name, const std::vector<std::string>& args, CommandLine* line);

// --out DIR, --workers N, --log-level L, --hostfile FILE and --host LIST as the
// overrides they stand for.
void options_as_overrides(const CommandLine& line, std::vector<std::string>* overrides);

// --dry-run or --print-config: print the resolved experiment and stop.
bool dry_run(const CommandLine& line);

}  // namespace tandem::cli
