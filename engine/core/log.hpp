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
//
// This header is included by most of the engine, so it stays light (DESIGN.md habit
// 12): it declares its own levels and formats with fmt's core header (the format
// string checked at compile time, as spdlog's), and only log.cpp includes spdlog,
// whose header costs seconds of compile time in every file that includes it.
#include <fmt/core.h>

#include <string>
#include <string_view>
#include <utility>

namespace tandem::log {

// spdlog's levels, in its order.
enum class Level : int { trace = 0, debug, info, warn, error, critical, off };

// Whether a line at this level would be printed (so a costly line is built only then).
bool should_log(Level level);
// One formatted line to every sink at this level.
void write(Level level, std::string_view line);
// Flushes every sink (before an abort, so the last lines are not lost).
void flush();

template <typename... Args>
void at(Level level, fmt::format_string<Args...> format, Args&&... args) {
  if (should_log(level)) write(level, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void trace(fmt::format_string<Args...> format, Args&&... args) { at(Level::trace, format, std::forward<Args>(args)...); }
template <typename... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) { at(Level::debug, format, std::forward<Args>(args)...); }
template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) { at(Level::info, format, std::forward<Args>(args)...); }
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) { at(Level::warn, format, std::forward<Args>(args)...); }
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) { at(Level::error, format, std::forward<Args>(args)...); }
template <typename... Args>
void critical(fmt::format_string<Args...> format, Args&&... args) { at(Level::critical, format, std::forward<Args>(args)...); }

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
