#pragma once
// Steps skipped in a row for a NaN or Inf, against max_nonfinite_steps: one skipped
// step is noise to step over, that many in a row is training that has diverged. The
// bsp loop, local SGD and the parameter server each keep one streak and say the same
// things about it.
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace tandem {

class NonfiniteStreak {
public:
  explicit NonfiniteStreak(int64_t limit) : limit_(limit) {}
  void finite() { run_ = 0; }
  // One more skipped step; true once the streak reaches the limit.
  bool skipped() { return ++run_ >= limit_; }
  // For the log line of each skip.
  std::string progress() const { return fmt::format("{} in a row, the run stops at {}", run_, limit_); }
  // Why the run stops: `what` (e.g. "steps", "updates") held a NaN or Inf `where`.
  std::string diverged(const std::string& what, const std::string& where) const {
    return fmt::format("{} {} in a row had a NaN or Inf ({}): training has diverged (max_nonfinite_steps = {})", run_,
                       what, where, limit_);
  }

private:
  int64_t limit_, run_ = 0;
};

}  // namespace tandem
