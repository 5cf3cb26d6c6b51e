#pragma once
// What `tandem --help` and `tandem COMMAND --help` print, from the subcommands' option
// tables (options.hpp), and the one-line form of a usage error.
#include <string>
#include <vector>

#include "engine/cli/options.hpp"

namespace tandem::cli {

// Exit statuses, as docs/experiments.md and `tandem --help` document them.
constexpr int kExitFailure = 1;  // a bad experiment, a training error, a failed job
constexpr int kExitUsage = 2;    // the command line is wrong
constexpr int kExitInterrupted = 130;  // Ctrl-C (128 + SIGINT), as shells report it

// Every subcommand: run, sim, profile, sample, attach, report, test, version.
const std::vector<Command>& commands();
// The subcommand named `name`, or nullptr.
const Command* find_command(const std::string& name);

// `tandem --help`: the subcommands, one line each, and the exit statuses.
std::string top_level_help();
// `tandem COMMAND --help`: its usage line, what it does, and its options.
std::string command_help(const Command& cmd);

// Prints "tandem: <msg>" and where to read more to stderr; returns kExitUsage.
// cmd: the subcommand the mistake was made in, or nullptr for the top level.
int usage_error(const std::string& msg, const Command* cmd = nullptr);

// "unknown command 'rnu' (did you mean 'run'?)".
std::string unknown_command(const std::string& name);

}  // namespace tandem::cli
