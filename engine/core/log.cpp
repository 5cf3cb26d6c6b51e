#include "engine/core/log.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "engine/core/error.hpp"

namespace tandem::log {

namespace {
int g_rank = 0;

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
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
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

void set_level(const std::string& level) { spdlog::default_logger()->set_level(parse_level(level)); }

int rank() { return g_rank; }

}  // namespace tandem::log
