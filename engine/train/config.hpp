#pragma once
// An experiment after its Lua file and the command-line overrides were resolved and
// validated. Every field has a default here and in scripts/tandem/experiment.lua;
// the Lua schema is the one users read (and the one that rejects unknown keys).
#include <cstdint>
#include <optional>
#include <string>

#include "engine/nn/spec.hpp"

namespace tandem {

struct DataConfig {
  std::string name = "fashion-mnist";  // fashion-mnist | synthetic
  std::string dir = "/usr/share/datasets/fashion-mnist";
  // synthetic only: shape of one sample, number of classes, train/test sizes.
  Shape shape = {1, 28, 28};
  int classes = 10;
  int64_t train_size = 60000;
  int64_t test_size = 10000;
  uint64_t seed = 7;
};

struct OptimizerConfig {
  std::string name = "sgd";
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
  bool nesterov = false;
};

struct ScheduleConfig {
  std::string kind = "constant";  // constant | step | cosine
  int64_t warmup_iterations = 0;  // linear ramp from 0 to lr
  double step_epochs = 1.0;       // step: multiply by gamma every step_epochs epochs
  double gamma = 0.1;
  double min_lr = 0.0;  // cosine: the floor reached at the last iteration
};

struct StopConfig {
  double epochs = 1.0;                    // always a bound
  std::optional<double> target_accuracy;  // stop early once test accuracy reaches it
  std::optional<int64_t> max_iterations;  // optional tighter bound
  std::optional<double> max_seconds;      // wall-clock bound
};

struct ExperimentConfig {
  std::string name = "experiment";
  std::string source;  // the experiment file
  ModelSpec model;
  DataConfig data;
  int64_t global_batch = 64;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  StopConfig stop;
  int64_t eval_every = 0;     // iterations between test evaluations; 0 = once per epoch
  int64_t log_every = 100;    // iterations between progress lines
  int64_t eval_batch = 1000;  // batch used for test evaluation
  uint64_t seed = 1;
  int blas_threads = 1;
  std::string log_level = "info";
  std::string out_dir;         // empty: runs/<name>-<timestamp>
  std::string resolved_json;   // the whole resolved config, written to the run directory
};

}  // namespace tandem
