#pragma once
// The run directory: everything one run leaves behind, in one place a user can share.
//   config.json   the resolved experiment (after overrides)
//   log.txt       the log
//   trace.jsonl   one JSON object per iteration (and per evaluation)
//   summary.json  the outcome: accuracy, throughput, time to target
#include <cstddef>
#include <string>

namespace tandem {

// Default location: runs/<name>-<YYYYmmdd-HHMMSS>; an explicit directory is used as is.
std::string make_run_dir(const std::string& requested, const std::string& experiment_name);
// Fails, naming the directory, when `dir` holds an earlier run's files (config.json,
// summary.json, trace.jsonl, log.txt, checkpoints/): a new run there would overwrite
// them. The command line calls it before a new run unless --overwrite is given;
// --resume and an elastic restart continue in their directory on purpose and do not.
// An empty or missing directory, or "" (a fresh default directory), passes.
void check_no_earlier_run(const std::string& dir);
void write_text_file(const std::string& path, const std::string& text);
// The whole file; fails naming it when it cannot be read.
std::string read_text_file(const std::string& path);
void write_binary_file(const std::string& path, const void* data, size_t bytes);

}  // namespace tandem
