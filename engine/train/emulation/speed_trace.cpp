#include "engine/train/emulation/speed_trace.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// The fields of one data line. With a comma anywhere the line is CSV, and an empty
// field ("1,,2" or a trailing comma) is an error rather than silently skipped, since
// it usually means a missing worker; without one, any run of whitespace separates.
std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> out;
  if (line.find(',') != std::string::npos) {
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      out.push_back(trim(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && is_space(line[i])) ++i;
      const size_t b = i;
      while (i < line.size() && !is_space(line[i])) ++i;
      if (i > b) out.push_back(line.substr(b, i - b));
    }
  }
  return out;
}

}  // namespace

SpeedTrace SpeedTrace::load(const std::string& path, int workers) {
  std::ifstream in(path);
  if (!in)
    TANDEM_FAIL_HINT(
        "check emulation.speed_trace: a relative path is looked up where tandem runs, then beside the experiment file",
        "cannot open speed trace '", path, "'");
  return parse(in, path, workers);
}

SpeedTrace SpeedTrace::parse(std::istream& in, const std::string& source, int workers) {
  TANDEM_CHECK(workers >= 1, "speed trace '", source, "' read for ", workers, " workers");
  const std::string format_hint =
      "write one line per iteration with one positive speed multiplier per worker, separated by commas or spaces; "
      "'#' starts a comment";
  SpeedTrace trace;
  trace.source_ = source;
  trace.workers_ = workers;
  std::string raw;
  int64_t line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    const std::vector<std::string> fields = fields_of(line);
    if (static_cast<int>(fields.size()) != workers)
      TANDEM_FAIL_HINT(format_hint, "speed trace ", source, ":", line_no, ": expected ", workers,
                       " speeds (one per worker), found ", fields.size(), " in '", line, "'");
    for (size_t k = 0; k < fields.size(); ++k) {
      const std::string& f = fields[k];
      if (f.empty())
        TANDEM_FAIL_HINT(format_hint, "speed trace ", source, ":", line_no, ": the speed of worker r", k,
                         " is empty in '", line, "'");
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(f.c_str(), &end);
      if (end != f.c_str() + f.size() || errno == ERANGE)
        TANDEM_FAIL_HINT(format_hint + " (a header line must be commented out with '#')", "speed trace ", source,
                         ":", line_no, ": '", f, "' (worker r", k, ") is not a number");
      if (!std::isfinite(v) || v <= 0.0)
        TANDEM_FAIL_HINT("a speed multiplier must be positive: 1 is full speed, 0.5 half speed", "speed trace ",
                         source, ":", line_no, ": worker r", k, " has speed ", f);
      trace.speeds_.push_back(v);
    }
  }
  if (in.bad()) TANDEM_FAIL_HINT("check the file is readable", "error while reading speed trace '", source, "'");
  if (trace.speeds_.empty())
    TANDEM_FAIL_HINT(format_hint, "speed trace '", source, "' holds no speeds (", line_no,
                     " lines, all blank or comments)");
  return trace;
}

double SpeedTrace::multiplier(int rank, int64_t iteration) const {
  if (speeds_.empty()) return 1.0;
  TANDEM_CHECK(rank >= 0 && rank < workers_, "rank ", rank, " is outside the ", workers_, " workers of speed trace '",
               source_, "'");
  TANDEM_CHECK(iteration >= 0, "negative iteration ", iteration);
  const int64_t row = iteration < iterations() ? iteration : iterations() - 1;
  return speeds_[static_cast<size_t>(row * workers_ + rank)];
}

}  // namespace tandem
