#pragma once
// An experiment after its Lua file and the command-line overrides were resolved and
// validated. scripts/tandem/experiment.lua is the schema: every key, its default and
// its range. engine/script/experiment_fields.cpp names the member each key sets, and
// test_schema_agreement fails when a default, a kind or a key here differs from the
// Lua one, so the two cannot drift apart silently. nn and data own their settings
// (OptimizerConfig, ScheduleConfig, DataConfig), which this file gathers.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/data_config.hpp"
#include "engine/nn/optimizer_config.hpp"
#include "engine/nn/schedule_config.hpp"
#include "engine/nn/spec.hpp"

namespace tandem {

struct StopConfig {
  double epochs = 1.0;                    // always a bound
  std::optional<double> target_accuracy;  // stop early once test accuracy reaches it
  // Stop early once the test (validation) loss, mean per prediction, is at most this:
  // a language model's target (accuracy means little per token).
  std::optional<double> target_loss;
  std::optional<int64_t> max_iterations;  // optional tighter bound
  std::optional<double> max_seconds;      // wall-clock bound
};

// Emulated heterogeneity: makes a homogeneous machine behave like a cluster of
// workers with different, possibly changing, speeds (engine/train/emulation/emulator.hpp).
// Ranks are numbered from 0 everywhere, as in the logs ("[r3]").
struct DeviceProfile {
  // Compute ms of one step at each measured local batch; interpolated linearly
  // between points and extrapolated from the last two beyond them.
  std::vector<double> batch, ms;
  // This machine's calibration only: the host's part of a step at each batch
  // (loading the batch + the optimizer step), which the emulated device does not
  // stretch but which must not wait for a core either (trainer.cpp). May be empty.
  std::vector<double> host_ms = {};
  // tandem profile only: device memory held (MB) after a step at each batch.
  std::vector<double> memory_mb = {};
};

struct WorkerEmulation {
  double speed = 1.0;                   // fraction of the reference device's speed
  std::optional<DeviceProfile> profile;  // replaces the speed factor when set
  double comm_delay_ms = 0.0;           // added to every collective this worker joins
};

struct SlowdownEvent {
  int worker = 0;
  double speed = 1.0;  // multiplies the worker's speed while active
  int64_t from = 0;    // first iteration (inclusive)
  // The iteration it ends before; unset in the experiment: the end of the run.
  int64_t to = INT64_MAX;
};

struct RandomSlowdowns {
  double probability = 0.0;                // per worker and iteration, that a slowdown starts
  int64_t min_duration = 1, max_duration = 1;  // iterations
  double min_speed = 0.5, max_speed = 0.5;     // speed multiplier drawn uniformly in the range
  uint64_t seed = 1;
};

struct EmulationConfig {
  bool enabled = false;
  // The speed-1.0 device runs at this fraction of one core: every worker's compute
  // is stretched by 1/reference as well, so several emulated workers fit in the
  // cores together (0.5 = "half a core").
  double reference = 1.0;
  std::vector<WorkerEmulation> workers;  // one per rank; missing ranks run at speed 1
  std::vector<SlowdownEvent> events;
  RandomSlowdowns random;
  std::string speed_trace;  // file: one line per iteration, one speed multiplier per worker
  // This machine's compute ms by batch, as calibrated at start-up (calibration.hpp)
  // and written to the run directory; given here it replaces the calibration, so
  // several runs (a benchmark's) stretch the same numbers.
  std::optional<DeviceProfile> calibration;
};

// How the global batch is split across workers when no policy (PolicyConfig)
// re-decides it every iteration.
struct PlanConfig {
  // equal | proportional (to emulated speeds) | fixed | random (a new uneven split
  // every iteration: for testing that any split trains the same)
  std::string kind = "equal";
  std::vector<int64_t> batches;  // fixed: one local batch per rank, summing to global_batch
  // One micro-batch count per rank (Plan::micro_batches); empty: accumulate for every rank.
  std::vector<int64_t> micro_batches;
  // How workers synchronise when no policy says otherwise (plan.hpp SyncPlan).
  struct Sync {
    std::string mode = "bsp";     // bsp | grouped | ksync | local
    std::vector<int64_t> groups;  // grouped: 1-based group per rank (empty: one group)
    int k = 0;                    // ksync: 0 = every worker
    int local_steps = 4;          // local: H
    int staleness = 1;            // grouped: S
    int sync_every = 10;          // grouped, ksync: global batches between meetings
  } sync;
};

// A Lua policy that re-decides the plan every iteration (engine/script/policy_host.hpp).
struct PolicyConfig {
  std::string file;  // resolved path of the policy file; empty: no policy, the plan stays
  std::string params_json = "{}";  // handed to init() as cluster.params
  double budget_ms = 50.0;         // one call's time budget; past it the call is interrupted
  double memory_mb = 64.0;         // the policy's Lua state may hold no more
  // CPU ms for loading the file, init(cluster) and restore(state); unset: budget_ms
  // + PolicyLimits::kSetupExtraMs
  std::optional<double> init_budget_ms;
  int max_failures = 3;            // failed calls in a row before the policy is dropped
  int history = 20;                // iterations of stats history step() sees
  bool watch = true;               // reload the policy when its file changes
  int64_t min_batch = 0;                // every worker's lower bound
  std::vector<int64_t> max_batch;       // per worker upper bound (its memory cap); default B
  // policy.global_batch = {min, max}: the global batches a plan may carry (issue 23:
  // adaptive B); 0 = the experiment's global_batch (fixed, as without the setting).
  int64_t global_batch_min = 0;
  int64_t global_batch_max = 0;
};

// How the learning rate follows a plan's global batch B against the experiment's B0
// (global_batch, for which lr is given): linear (lr B / B0, Goyal et al.), sqrt
// (lr sqrt(B / B0)), or adascale (lr times AdaScale's gain r = (phi / B0 + 1) /
// (phi / B + 1), phi the gradient noise scale measured in training; Johnson et al.
// 2020). Equal to lr at B = B0 in every case.
enum class LrScaling : int { linear = 0, sqrt = 1, adascale = 2 };

// Where workers compute (engine/train/device_choice.hpp).
struct DeviceConfig {
  std::string kind = "auto";            // cpu | cuda | auto (cuda where a GPU is present)
  std::vector<std::string> per_worker;  // one kind per rank, overriding kind (mixed clusters)
  std::string precision = "fp32";       // fp32 | tf32 | bf16: what GEMMs and convolutions compute in
};

// `tandem sim`: the cluster model the simulator runs the policy against
// (engine/sim/simulator.hpp). Compute comes from the emulation settings (speeds,
// profiles, events, random slowdowns, speed trace) over the machine calibration.
struct SimConfig {
  double noise = 0.0;              // spread of a mean-1 multiplier on every compute time
  std::string noise_distribution = "lognormal";  // lognormal | normal | uniform | spikes (see sim/compute_model.cpp)
  uint64_t seed = 1;
  double latency_us = 5.0;       // per message of the ring all-reduce
  double bandwidth_gb_s = 10.0;  // per link
  // Workers per host: above 1 the bsp gradients go in two levels (the host's sum in its
  // memory, not modelled; the ring across hosts among their first workers).
  int64_t ranks_per_host = 1;
  int64_t trace_every = 1;       // trace every n-th iteration (thousands of workers write a lot)
  // The gradients' noise, which the simulator has none of (sim/gradient_model.hpp):
  // the gradient noise scale B_noise at the start (0: not modelled, no grad_sq in
  // the stats), growing with the epochs e done as B_noise (1 + noise_growth e).
  double noise_scale = 0.0;
  double noise_growth = 0.0;
};

// Checkpoints (engine/train/checkpoint/file.hpp).
struct CheckpointConfig {
  int64_t every = 0;    // iterations between checkpoints; 0: none (unless every_s)
  double every_s = 0;   // seconds of training between checkpoints; 0: none (unless every)
  int64_t keep = 3;     // the newest kept
  bool final = true;    // one when the run ends
  bool enabled() const { return every > 0 || every_s > 0; }
};

// `tandem run --elastic` (engine/train/elastic.hpp): the launching process supervises
// the job and restarts it from its newest good checkpoint when a rank dies or hangs.
struct ElasticConfig {
  int64_t min_workers = 1;   // below this many workers the job is not restarted
  int64_t max_restarts = 3;  // restarts after which a further failure ends the run
  double probe_timeout_s = 10;  // a host that does not run a probe by then is left out
};

// How gradients cross between workers (engine/train/sync/gradient_sync.hpp).
struct CommConfig {
  // Buckets of about this many MB, all-reduced during the backward pass where the
  // transport gains by it (MPI between hosts; gradient_buckets.hpp); 0: one all-reduce
  // after the backward pass. 25 as PyTorch DDP's bucket_cap_mb.
  double bucket_mb = 25.0;
  // What gradients cross between hosts as: fp32, or bf16 (half the bytes; the sum
  // accumulated in fp32: engine/dist/mpi_async_allreduce.hpp). On one host (shared
  // memory) and over NCCL they stay fp32.
  std::string dtype = "fp32";
};

// An injected failure (engine/train/emulation/faults.hpp).
struct FaultConfig {
  int rank = 0;
  int64_t iteration = 0;
  std::string kind = "kill";       // kill (SIGKILL) | stop (SIGSTOP) | nan (a NaN in the gradient)
  std::string during = "compute";  // compute | allreduce | checkpoint
};

struct ExperimentConfig {
  std::string name = "experiment";
  std::string source;  // the experiment file
  ModelSpec model;
  DataConfig data;
  int64_t global_batch = 64;
  std::string lr_scaling = "linear";  // LrScaling by name
  // The smallest and largest global batch a plan may carry (policy.global_batch,
  // resolved: both global_batch when fixed).
  int64_t global_batch_min() const { return policy.global_batch_min > 0 ? policy.global_batch_min : global_batch; }
  int64_t global_batch_max() const { return policy.global_batch_max > 0 ? policy.global_batch_max : global_batch; }
  bool adaptive_batch() const { return global_batch_min() != global_batch_max(); }
  // Whether lr follows AdaScale's gain, which needs the noise scale measured.
  bool adascale_gain() const { return lr_scaling == "adascale" && adaptive_batch(); }
  // Micro-batches per worker and step (gradient accumulation, engine/train/step.hpp).
  int64_t accumulate = 1;
  // The fused step (engine/train/step.hpp), for one worker: auto (on a GPU, where the
  // run allows it), always (or fail saying why not), never.
  std::string fused_step = "auto";
  ElasticConfig elastic;
  CommConfig comm;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  StopConfig stop;
  int64_t eval_every = 0;     // iterations between test evaluations; 0 = once per epoch
  int64_t log_every = 100;    // iterations between progress lines
  int64_t eval_batch = 1000;  // batch used for test evaluation
  uint64_t seed = 1;
  int workers = 1;  // ranks; more than one launches through mpirun
  // Where the launcher starts the ranks (engine/dist/hosts.hpp): an OpenMPI hostfile
  // and/or "a:2,b:2"; both empty: this machine only.
  std::string hostfile;
  std::string hosts;
  PlanConfig plan;
  EmulationConfig emulation;
  PolicyConfig policy;
  double collective_timeout_s = 30.0;  // a collective not done by then aborts the run, naming the missing ranks
  CheckpointConfig checkpoint;
  int64_t max_nonfinite_steps = 5;  // NaN/Inf gradient steps in a row, skipped, after which the run stops
  std::vector<FaultConfig> faults;  // injected failures, for the reliability tests
  int blas_threads = 1;
  DeviceConfig device;
  SimConfig sim;
  std::string log_level = "info";
  std::string out_dir;         // empty: runs/<name>-<timestamp>
  bool save_params = false;    // write the final parameters to <run dir>/params.f32
  std::string init_from;       // a .safetensors file the model starts from (engine/train/checkpoint/init_from.hpp)
  bool init_from_strict = true;  // every tensor of the model in the file, and nothing else
  bool tensorboard = false;    // write TensorBoard event files to <run dir>/tensorboard/
  bool console = true;         // rank 0 listens on <run dir>/repl.sock (tandem attach)
  std::string resolved_json;   // the whole resolved config, written to the run directory
  bool resume = false;         // tandem run --resume: continue from out_dir's last good checkpoint
};

}  // namespace tandem
