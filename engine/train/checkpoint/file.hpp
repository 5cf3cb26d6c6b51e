#pragma once
// Checkpoints: everything a run needs to continue exactly where it was.
//
// What is in one: the parameters, the optimizer's momentum, the layers' running
// statistics (batch norm), the iteration to run next (the sampler's position: the
// global sampler draws the batch of iteration t from (seed, epoch, t) alone, and
// every other random stream of the engine, dropout masks, random plans, emulated
// slowdowns, is counter-based on (seed, iteration) too, so seed and iteration ARE
// the random state), the plan in force, the policy's own state (its save() result,
// as a Lua literal), and the run's running totals (training time, samples, weight
// version, accuracies). The world size is recorded but not required: a run may
// resume on fewer workers, and the plan is then re-decided.
//
// The file: "TANDEMCK", format version (u32), header length (u32), a JSON header,
// the payload (float32 parameters and momentum, float64 layer state, the pending
// stats' bytes), and a CRC-32
// (zlib) of everything before it. It is written to a temporary file, fsync'ed,
// renamed over the final name and the directory fsync'ed, so a crash at any moment
// leaves either the old set of checkpoints or the new one, never a torn file under a
// checkpoint's name. The newest `keep` are kept.
//
// Reading checks, in order: the length (truncated), the magic, the format version,
// the checksum (corrupted), the model (this experiment's model summary); the first
// failed check is named. load_latest() walks back from the newest until one passes.
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/train/plan.hpp"

namespace tandem {

constexpr uint32_t kCheckpointFormat = 1;

struct CheckpointState {
  int64_t iteration = 0;  // iterations done: training resumes at this one
  int world = 0;          // workers of the run that wrote it
  uint64_t seed = 0;
  std::string experiment;         // its name
  std::string model;              // Model::summary(): layers and parameter counts
  int64_t param_count = 0;
  std::vector<float> params, velocity;  // velocity empty: plain SGD
  std::vector<double> layer_state;
  // The workers' stats of the iteration before `iteration`, which rank 0 records and
  // hands to the policy during the next one (raw WorkerStats, `stats_record` bytes
  // each; empty when none are pending): the resumed run records and decides on
  // them as the uninterrupted one would have.
  std::string pending_stats;
  int64_t stats_record = 0;
  // The policy host's stats window (what the policy sees as stats.history) and the
  // cluster stats handed to the policy with the pending stats (global_grad_sq):
  // opaque bytes of this build, for a resumed run on the same cluster.
  std::string policy_window, cluster_stats;
  Plan plan;                      // in force at `iteration`
  std::string policy;             // the policy's name; empty: none
  std::string policy_state;       // its save() as a Lua literal; empty: none
  double train_ms = 0.0;          // training time so far (evaluations and pauses excluded)
  int64_t samples = 0;            // samples trained on so far
  int64_t version = 0;            // weight updates applied
  double test_accuracy = 0.0, best_test_accuracy = 0.0;
  std::optional<double> time_to_target_s;
};

// A checkpoint that fails a check; what() names the file and the check.
struct CheckpointRejected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// <run dir>/checkpoints, and the file of a checkpoint at an iteration there.
std::string checkpoint_dir(const std::string& run_dir);
std::string checkpoint_path(const std::string& dir, int64_t iteration);
// The checkpoints in `dir`, newest first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// Writes atomically (see the header), then deletes all but the newest `keep`.
// `midway`, when set, runs after half the payload is written (fault injection).
// Fails naming the file and the system's reason (a full disk, permissions).
void write_checkpoint(const std::string& dir, const CheckpointState& s, int64_t keep,
                      const std::function<void()>& midway = {});

// Reads and checks one file; throws CheckpointRejected naming the failed check.
// `model` (a Model::summary()), when not empty, must match.
CheckpointState read_checkpoint(const std::string& path, const std::string& model = "");

// The newest checkpoint in `dir` that passes every check, the rejected ones logged
// with their reason; nullopt when there is none (each rejection in *why).
struct LoadedCheckpoint {
  CheckpointState state;
  std::string path;
};
std::optional<LoadedCheckpoint> load_latest_checkpoint(const std::string& dir, const std::string& model,
                                                       std::vector<std::string>* why);

}  // namespace tandem
