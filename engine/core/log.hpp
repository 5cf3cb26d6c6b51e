#pragma once
// Logging through spdlog. Every line is tagged with the worker's rank ("[r0]") so the
// interleaved output of several workers can be told apart; a run directory gets its
// own file sink next to the console.
//
// Progress: where stderr is a terminal, the progress line is one bar redrawn in
// place ('\r'), the other log lines printed above it; where it is a file or a pipe
// (tests, nohup, mpirun's forwarding of the ranks' output), every progress line is a
// plain log line. TANDEM_PROGRESS_BAR=1 or 0 forces either (the launcher may know
// that the terminal is its own stderr); log.txt always gets plain lines.
#include <spdlog/spdlog.h>

#include <string>

namespace tandem::log {

// Sets up the default logger for this worker. level: trace|debug|info|warn|error|off.
void init(int rank, const std::string& level = "info");
// Adds a file sink (the run's log.txt); safe to call once the run directory exists.
void add_file(const std::string& path);
void set_level(const std::string& level);
int rank();

// A progress line (info level): the bar on a terminal, a log line otherwise.
// fraction: the share done, in [0, 1].
void progress(const std::string& line, double fraction);
// The bar, if one is shown, stays as the last line and the next output starts below.
void end_progress();

// "1 worker", "4 workers": a count with its noun, for messages (not "4 worker(s)").
inline std::string counted(long long n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace tandem::log
