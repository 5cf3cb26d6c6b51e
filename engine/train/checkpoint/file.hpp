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
// the header's section lengths against the bytes the file holds, the checksum
// (corrupted), every header field's type and range, the model (this experiment's
// model summary and sizes); the first failed check is named. A checksum only tells
// an accident from a good file: one altered on purpose (CRC recomputed) meets the
// same checks, so no number from the file sizes an allocation or a copy before it
// was checked against the file's length and the model's sizes, with arithmetic
// that cannot overflow. load_latest() walks back from the newest until one passes.
//
// The rules a header meets (every value a JSON integer where a count is meant: not a
// fraction, a string, a number past int64, rounded or wrapped):
//   - the section counts (param_count, velocity_count, layer_state_count, stats_bytes,
//     window_bytes, cluster_bytes) are integers >= 0 whose bytes fill the file between
//     the header and the checksum exactly;
//   - param_count and layer_state_count are the model's (CheckpointExpect), and
//     velocity_count is 0 (plain SGD), param_count (SGD's momentum) or twice it
//     (AdamW's two moments); optimizer_steps an integer from 0 to 2^53 (0 when absent:
//     files from before AdamW), skipped_steps the same (0 when absent: files from
//     before it was kept);
//   - iteration, samples, version: integers from 0 to 2^53; train_ms and
//     time_to_target_s (or null): numbers from 0 to 2^53; the accuracies from 0 to 1;
//     world from 1 to INT_MAX; seed any u64; experiment, model, policy, policy_state
//     strings, the model's equal to this experiment's summary;
//   - stats_record from 0 to 2^16, and pending stats (when any) one record per worker;
//   - the plan: one local batch per worker (integers, summing to at most 2^53), a known
//     sync mode, groups empty or one per worker in 0..world-1, the sync integers in int
//     range, and Plan::validate passes for the world and the batches' sum.
// The opaque sections (pending stats, the policy's window, cluster stats) are bounded
// by the file only; their readers check their own sizes and contents.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/error.hpp"
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
  // velocity: the optimizer's state buffers one after the other (engine/nn/optimizer.hpp):
  // empty for plain SGD, SGD's momentum, or AdamW's m then v.
  std::vector<float> params, velocity;
  int64_t optimizer_steps = 0;  // updates the optimizer took (AdamW's bias correction)
  int64_t skipped_steps = 0;    // steps skipped for a NaN or Inf so far (0 in files from before it was kept)
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
  // Where the sampler stands (engine/data/batch_positions.hpp): samples drawn and the
  // stream position of the next global batch; -1 in a file from before adaptive
  // global batches (B fixed: both follow from the iteration).
  int64_t samples_drawn = -1, sample_cursor = -1;
  double noise_scale = 0.0;         // in force for lr_scaling = 'adascale'
  std::vector<double> noise_state;  // rank 0's estimator (train/noise_scale.hpp); empty: none
  int64_t version = 0;            // weight updates applied
  double test_accuracy = 0.0, best_test_accuracy = 0.0;
  std::optional<double> time_to_target_s;
};

// A checkpoint that fails a check: what_failed() names the file, the check and the
// field ("<path>: <check>", one line for lists of rejections), hint() what to do.
struct CheckpointRejected : Error {
  using Error::Error;
};

// What the model being resumed holds, so that a checkpoint's counts are checked
// against it before anything is allocated. Unset parts are not checked (listing a
// run's checkpoints without building its model); the file's own consistency is.
struct CheckpointExpect {
  std::string model;                        // Model::summary(); empty: any
  std::optional<int64_t> param_count;       // velocity_count must be 0, this, or twice it (AdamW) too
  std::optional<int64_t> layer_state_count;
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

// Reads and checks one file; throws CheckpointRejected naming the failed check (and
// nothing else: not a parse error, not bad_alloc from a size in the file).
CheckpointState read_checkpoint(const std::string& path, const CheckpointExpect& expect = {});
// The same with only the model summary to match (when not empty).
CheckpointState read_checkpoint(const std::string& path, const std::string& model);

// The newest checkpoint in `dir` that passes every check, the rejected ones logged
// with their reason; nullopt when there is none (each rejection in *why).
struct LoadedCheckpoint {
  CheckpointState state;
  std::string path;
};
std::optional<LoadedCheckpoint> load_latest_checkpoint(const std::string& dir, const CheckpointExpect& expect,
                                                       std::vector<std::string>* why);

}  // namespace tandem
