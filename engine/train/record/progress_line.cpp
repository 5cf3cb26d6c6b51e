#include "engine/train/record/progress_line.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tandem {

std::string clock_text(double seconds) {
  const int64_t s = std::llround(std::max(seconds, 0.0));
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

StopEstimate estimate_stop(const StopConfig& stop, int64_t done, int64_t total, double train_s,
                           double s_per_iteration) {
  StopEstimate e;
  if (total > 0) {
    e.fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    if (s_per_iteration > 0) e.remaining_s = s_per_iteration * static_cast<double>(std::max<int64_t>(total - done, 0));
  }
  // max_seconds counts training time (evaluations and pauses excluded), as the stop does.
  if (stop.max_seconds && *stop.max_seconds > 0) {
    const double by_time = std::min(1.0, train_s / *stop.max_seconds);
    if (by_time > e.fraction || e.remaining_s < 0) {
      e.fraction = std::max(e.fraction, by_time);
      e.remaining_s = std::max(*stop.max_seconds - train_s, 0.0);
    }
  }
  return e;
}

std::string stop_text(const StopConfig& stop, int64_t total, int64_t per_epoch) {
  const bool by_iterations = stop.max_iterations && *stop.max_iterations == total &&
                             static_cast<double>(total) < stop.epochs * static_cast<double>(per_epoch);
  std::string text = fmt::format("stops after {} iterations ({})", total,
                                 by_iterations ? "stop.max_iterations" : fmt::format("{:g} epochs", stop.epochs));
  if (stop.max_seconds) text += fmt::format(", {:g} s of training", *stop.max_seconds);
  // A target cannot be foreseen: the progress lines count against the bounds above.
  if (stop.target_accuracy) text += fmt::format(" or at test accuracy {:g}", *stop.target_accuracy);
  if (stop.target_loss) text += fmt::format(" or at test loss {:g}", *stop.target_loss);
  return text;
}

std::string progress_line(const ProgressView& v) {
  const StopEstimate& e = v.estimate;
  const std::string total = e.remaining_s >= 0 ? "~" + clock_text(v.elapsed_s + e.remaining_s) : "?";
  std::string line = fmt::format("[{}/{} {:>3.0f}%] epoch {:.2f} iter {}/{}", clock_text(v.elapsed_s), total,
                                 std::floor(100.0 * e.fraction), v.epochs, v.done, v.total);
  auto out = std::back_inserter(line);
  if (v.loss) fmt::format_to(out, " loss {:.4f}", *v.loss);
  if (v.train_accuracy) fmt::format_to(out, " acc {:.3f}", *v.train_accuracy);
  if (v.tokens_per_s)
    fmt::format_to(out, " {:.0f} tokens/s", *v.tokens_per_s);
  else
    fmt::format_to(out, " {:.0f} samples/s", v.samples_per_s);
  if (v.lr) fmt::format_to(out, " lr {:.2g}", *v.lr);
  return line;
}

namespace {
// The batches by rank, as many as fit in `width` columns: "24 20 14 6", or the first
// ones, "..." and the last ("24 20 ... 6").
std::string batches_text(const std::vector<int64_t>& b, size_t width) {
  std::string all;
  for (size_t i = 0; i < b.size(); ++i) all += (i ? " " : "") + std::to_string(b[i]);
  if (all.size() <= width || b.size() < 3) return all;
  const std::string tail = " ... " + std::to_string(b.back());
  std::string head = std::to_string(b[0]);
  for (size_t i = 1; i + 1 < b.size(); ++i) {
    const std::string next = head + " " + std::to_string(b[i]);
    if (next.size() + tail.size() > width) break;
    head = next;
  }
  return head + tail;
}
}  // namespace

std::string balance_line(const BalanceView& v) {
  const auto [lo, hi] = std::minmax_element(v.compute_ms.begin(), v.compute_ms.end());
  auto ms = [](double x) { return x < 100 ? fmt::format("{:.1f}", x) : fmt::format("{:.0f}", x); };
  std::string rest = fmt::format("; compute {} (r{}) - {} ms (r{}); idle {:.0f}% comm {:.0f}%", ms(*lo),
                                 lo - v.compute_ms.begin(), ms(*hi), hi - v.compute_ms.begin(), 100.0 * v.idle_share,
                                 100.0 * v.comm_share);
  // (The policy is named in the run's first lines.)
  if (!v.policy.empty()) rest += fmt::format("; {} new plan{}", v.plans, v.plans == 1 ? "" : "s");
  const std::string head = fmt::format("  {} batches: ", v.compute_ms.size());
  const size_t used = head.size() + rest.size();
  return head + batches_text(v.local_batch, used < kMessageColumns ? kMessageColumns - used : 0) + rest;
}

}  // namespace tandem
