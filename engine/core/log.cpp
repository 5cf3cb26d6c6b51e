#include "engine/core/log.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "engine/core/error.hpp"

namespace tandem::log {

namespace {
int g_rank = 0;

// The stderr sink, drawing the progress bar below the log lines where stderr is a
// terminal: a line logged clears the bar, prints, and draws it again.
class TerminalSink final : public spdlog::sinks::stderr_color_sink_mt {
public:
  void log(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::mutex> lock(bar_mutex_);
    if (!bar_.empty()) std::fputs("\r\033[K", stderr);
    spdlog::sinks::stderr_color_sink_mt::log(msg);
    draw();
  }
  void set_bar(std::string bar) {
    std::lock_guard<std::mutex> lock(bar_mutex_);
    if (!bar_.empty()) std::fputs("\r\033[K", stderr);
    bar_ = std::move(bar);
    draw();
  }
  void end_bar() {
    std::lock_guard<std::mutex> lock(bar_mutex_);
    if (!bar_.empty()) std::fputs("\n", stderr);
    bar_.clear();
  }

private:
  void draw() {
    if (bar_.empty()) return;
    std::fputs(bar_.c_str(), stderr);
    std::fflush(stderr);
  }
  std::mutex bar_mutex_;
  std::string bar_;
};

std::shared_ptr<TerminalSink> g_terminal;  // null: progress as plain lines

bool bar_wanted() {
  if (const char* v = std::getenv("TANDEM_PROGRESS_BAR")) return std::string(v) == "1";
  return ::isatty(STDERR_FILENO) == 1;
}

int terminal_columns() {
  winsize w{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 40) return w.ws_col;
  return 120;
}

spdlog::level::level_enum parse_level(const std::string& level) {
  auto l = spdlog::level::from_str(level);
  // from_str maps unknown names to off; an unknown name is a user mistake, not "off".
  if (l == spdlog::level::off && level != "off")
    TANDEM_FAIL_HINT("use one of trace, debug, info, warn, error, off", "unknown log level '", level, "'");
  return l;
}
}  // namespace

void init(int rank, const std::string& level) {
  g_rank = rank;
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (bar_wanted()) {
    g_terminal = std::make_shared<TerminalSink>();
    sink = g_terminal;
  } else {
    g_terminal.reset();
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  }
  auto logger = std::make_shared<spdlog::logger>("tandem", sink);
  logger->set_pattern("%H:%M:%S.%e [r" + std::to_string(rank) + "] %^%l%$ %v");
  logger->set_level(parse_level(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

void add_file(const std::string& path) {
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  sink->set_pattern("%Y-%m-%d %H:%M:%S.%e [r" + std::to_string(g_rank) + "] %l %v");
  spdlog::default_logger()->sinks().push_back(sink);
  spdlog::default_logger()->flush_on(spdlog::level::info);
}

bool should_log(Level level) {
  return spdlog::default_logger_raw()->should_log(static_cast<spdlog::level::level_enum>(level));
}

void write(Level level, std::string_view line) {
  spdlog::default_logger_raw()->log(static_cast<spdlog::level::level_enum>(level), "{}", line);
}

void flush() { spdlog::default_logger_raw()->flush(); }

void set_level(const std::string& level) { spdlog::default_logger()->set_level(parse_level(level)); }

int rank() { return g_rank; }

static_assert(static_cast<int>(Level::trace) == spdlog::level::trace &&
                  static_cast<int>(Level::critical) == spdlog::level::critical &&
                  static_cast<int>(Level::off) == spdlog::level::off,
              "tandem::log::Level follows spdlog's levels");

void progress(const std::string& line, double fraction) {
  auto logger = spdlog::default_logger();
  if (!g_terminal) {
    logger->info("{}", line);
    return;
  }
  if (!logger->should_log(spdlog::level::info)) return;
  // The other sinks (log.txt) get the plain line.
  const spdlog::details::log_msg msg(logger->name(), spdlog::level::info, line);
  for (auto& sink : logger->sinks())
    if (sink != g_terminal && sink->should_log(spdlog::level::info)) sink->log(msg);
  constexpr int kBar = 20;
  const int full = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * kBar));
  std::string bar = "[" + std::string(static_cast<size_t>(full), '#') + std::string(static_cast<size_t>(kBar - full), '.') +
                    "] " + line;
  bar.resize(std::min(bar.size(), static_cast<size_t>(terminal_columns() - 1)));
  g_terminal->set_bar(std::move(bar));
}

void end_progress() {
  if (g_terminal) g_terminal->end_bar();
}

}  // namespace tandem::log
