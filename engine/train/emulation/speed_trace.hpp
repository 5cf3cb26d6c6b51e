#pragma once
// A speed trace replays recorded (or scripted) speed changes: line k of the file holds
// the speed multiplier of every worker at iteration k. The format is the one a
// spreadsheet or `paste` produces: one line per iteration, one positive number per
// worker, separated by commas or by whitespace; '#' starts a comment, blank lines are
// skipped. After the last line the last line holds, rather than the trace restarting:
// a trace usually ends in the regime the run should stay in, and a cyclic replay would
// jump back to the first line's speeds without the file saying so.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace tandem {

class SpeedTrace {
public:
  SpeedTrace() = default;  // no trace: every multiplier is 1

  // Reads a trace file; every data line must hold exactly `workers` speeds. Errors
  // name the file and the line.
  static SpeedTrace load(const std::string& path, int workers);
  // Same, from a stream; `source` names it in errors ("file:line").
  static SpeedTrace parse(std::istream& in, const std::string& source, int workers);

  bool empty() const { return speeds_.empty(); }
  int64_t iterations() const { return workers_ > 0 ? static_cast<int64_t>(speeds_.size()) / workers_ : 0; }
  int workers() const { return workers_; }
  const std::string& source() const { return source_; }

  // The multiplier of `rank` at `iteration`: 1 without a trace, the last line's
  // value past the end.
  double multiplier(int rank, int64_t iteration) const;

private:
  std::string source_;
  int workers_ = 0;
  std::vector<double> speeds_;  // row-major: iteration, then worker
};

}  // namespace tandem
