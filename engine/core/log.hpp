#pragma once
// Logging through spdlog. Every line is tagged with the worker's rank ("[r0]") so the
// interleaved output of several workers can be told apart; a run directory gets its
// own file sink next to the console.
#include <spdlog/spdlog.h>

#include <string>

namespace tandem::log {

// Sets up the default logger for this worker. level: trace|debug|info|warn|error|off.
void init(int rank, const std::string& level = "info");
// Adds a file sink (the run's log.txt); safe to call once the run directory exists.
void add_file(const std::string& path);
void set_level(const std::string& level);
int rank();

}  // namespace tandem::log
