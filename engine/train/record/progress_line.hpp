#pragma once
// The progress line and the workers' balance line, as text. One format for every run:
//
//   [1:23/~4:10  33%] epoch 1.40 iter 420/1260 loss 0.4312 acc 0.870 1873 samples/s lr 0.05
//     4 batches: 24 20 14 6; compute 0.4 (r0) - 0.7 ms (r3); idle 27% comm 25%; 3 new plans
//
// Elapsed time and the estimated total (m:ss or h:mm:ss) and the share done are
// against the stop condition that binds first: iterations (stop.max_iterations,
// stop.epochs) by iterations done, stop.max_seconds by training time. A target
// accuracy or loss cannot be foreseen: the line ends "until acc 0.90" instead.
// Epochs are counted as iterations done over iterations per epoch (the sampler
// drops the last partial batch of an epoch), the same number in the progress
// lines, the evaluation lines and trace.jsonl. tandem sim trains nothing: its lines
// have no loss, accuracy or learning rate.
//
// Both lines fit kLineColumns with the log's prefix ("12:34:56.789 [r0] info "), for
// any number of workers: the balance line names the fastest and slowest worker and
// shortens the list of batches ("24 20 14 ... 6") to what fits.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/train/config.hpp"

namespace tandem {

constexpr size_t kLineColumns = 120;
constexpr size_t kLogPrefixColumns = 23;  // "12:34:56.789 [r0] info "
constexpr size_t kMessageColumns = kLineColumns - kLogPrefixColumns;

// m:ss under an hour, h:mm:ss above.
std::string clock_text(double seconds);

// How far the run is against the stop condition that binds first.
struct StopEstimate {
  double fraction = 0.0;      // done, in [0, 1]
  double remaining_s = -1.0;  // < 0: cannot tell yet
};
// done of total iterations; train_s of training so far; s_per_iteration: the
// wall-clock cost of an iteration so far (evaluations included; <= 0: unknown).
StopEstimate estimate_stop(const StopConfig& stop, int64_t done, int64_t total, double train_s,
                           double s_per_iteration);

// When the run stops, for its first lines: "stops after 1260 iterations (2 epochs)
// or at test accuracy 0.9".
std::string stop_text(const StopConfig& stop, int64_t total, int64_t per_epoch);

struct ProgressView {
  double elapsed_s = 0.0;
  StopEstimate estimate;
  double epochs = 0.0;  // completed, fractional
  int64_t done = 0, total = 0;
  // Absent where nothing was trained (tandem sim).
  std::optional<double> loss, train_accuracy, lr;
  double samples_per_s = 0.0;
  std::optional<double> tokens_per_s;  // a language model's
};
std::string progress_line(const ProgressView& v);

// The workers' balance over the logging window.
struct BalanceView {
  std::vector<int64_t> local_batch;  // the plan of the latest iteration, by rank
  std::vector<double> compute_ms;    // mean per iteration, by rank
  double idle_share = 0.0, comm_share = 0.0;
  std::string policy;                // empty: none ran (no count of plans then)
  int64_t plans = 0;                 // plans the policy decided in the window
};
std::string balance_line(const BalanceView& v);

}  // namespace tandem
