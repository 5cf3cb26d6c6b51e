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
void write_text_file(const std::string& path, const std::string& text);
// The whole file; fails naming it when it cannot be read.
std::string read_text_file(const std::string& path);
void write_binary_file(const std::string& path, const void* data, size_t bytes);

}  // namespace tandem
