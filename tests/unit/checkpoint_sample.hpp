#pragma once
// What the checkpoint tests (test_checkpoint, test_checkpoint_fuzz) share: a
// checkpoint's state with every field set, as a training run of three workers would
// write it, and a file's bytes read and written whole.
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "engine/train/checkpoint/file.hpp"

namespace tandem::testing {

inline CheckpointState sample_state(int64_t iteration, const std::string& model = "model 'mlp': 6 parameters") {
  CheckpointState s;
  s.iteration = iteration;
  s.world = 3;
  s.seed = 7;
  s.experiment = "unit";
  s.model = model;
  s.param_count = 6;
  s.params = {1.5f, -2.0f, 3.25f, std::numeric_limits<float>::denorm_min(), -0.0f, 1e30f};
  s.velocity = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  s.layer_state = {0.25, 1.0 / 3.0};
  s.pending_stats = std::string("\0\x01stats\0\x02stats\0\x03stats", 21);  // one 7-byte record per worker
  s.stats_record = 7;
  s.plan.local_batch = {10, 20, 34};
  s.policy = "lbb";
  s.policy_state = "{[\"x\"]=1,}";
  s.train_ms = 1234.5;
  s.samples = 64 * iteration;
  s.version = iteration;
  s.skipped_steps = 2;
  s.test_accuracy = 0.8;
  s.best_test_accuracy = 0.85;
  s.time_to_target_s = 12.5;
  return s;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace tandem::testing
