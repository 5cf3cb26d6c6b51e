#pragma once
// The training loop of one worker: sample the global batch, take this worker's
// slice, forward + backward + optimizer step, evaluate on the test set at intervals,
// and record everything in the run directory. Later issues put the plan, the
// all-reduce and the policy call between backward and the optimizer step.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/train/config.hpp"

namespace tandem {

struct RunSummary {
  std::string run_dir;
  std::string stop_reason;  // epochs | target_accuracy | max_iterations | max_seconds | interrupted
  int64_t iterations = 0;
  double epochs = 0.0;
  double final_loss = 0.0;  // mean training loss over the last logging window
  double test_accuracy = 0.0;
  double best_test_accuracy = 0.0;
  double samples_per_s = 0.0;  // training samples / training time (evaluations excluded)
  double train_s = 0.0;        // training time, evaluations excluded
  double wall_s = 0.0;         // whole run, set-up and evaluations included
  std::optional<double> time_to_target_s;  // training time until the target was first reached
  int64_t parameters = 0;
};

// Runs the experiment to its stop condition and writes the run directory.
RunSummary train(const ExperimentConfig& cfg);

}  // namespace tandem
