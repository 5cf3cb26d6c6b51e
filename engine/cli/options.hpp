#pragma once
// One table of options per subcommand (its name, whether it takes a value, its help
// line), from which everything about the command line comes: parsing (`--opt VALUE`
// and `--opt=VALUE` both), each subcommand's `--help`, and the "did you mean" of a
// misspelled option or subcommand. A new option is one row, never three edits.
#include <map>
#include <string>
#include <vector>

namespace tandem::cli {

struct Option {
  std::string name;   // "--workers"
  std::string value;  // the value's placeholder ("N", "DIR"); empty for a flag
  std::string help;   // one line
};

struct Command {
  std::string name;      // "run"
  std::string synopsis;  // what follows `tandem run` in the usage line
  std::string summary;   // one line, for `tandem --help`
  std::string details;   // the paragraph of `tandem run --help`
  std::string operand;   // what the one bare argument is ("experiment file"); empty: none taken
  bool overrides;        // key=value arguments are overrides of the experiment
  std::vector<Option> options;  // -h/--help is implied
};

// A parsed command line: its operand, its key=value overrides, and its options.
struct CommandLine {
  std::string operand;
  std::vector<std::string> overrides;
  std::map<std::string, std::string> options;  // "--out" -> its value; a flag -> ""
  bool help = false;                           // -h or --help was given
  bool has(const std::string& name) const { return options.count(name) != 0; }
  std::string operator[](const std::string& name) const {
    const auto it = options.find(name);
    return it == options.end() ? std::string() : it->second;
  }
};

// Parses args (those after the subcommand) by cmd's table. Returns what is wrong
// with them (one line, with a "did you mean" where an option is misspelled), or ""
// with *line filled.
std::string parse_command_line(const Command& cmd, const std::vector<std::string>& args, CommandLine* line);

// The nearest of `candidates` to `word` in spelling (tandem.text.distance, the edit
// distance behind the experiment keys' suggestions), or "" when none is close.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tandem::cli
