#pragma once
// `tandem sim`: the experiment's policy against a model of the cluster instead of
// training. Every iteration, each worker's compute time is what the emulator would
// stretch this machine's calibrated compute to (the same speeds, measured profiles,
// scheduled and random slowdowns and speed trace as a real emulated run, so a
// policy sees the same numbers), times optional noise (sim.noise_distribution); the host's part
// of a step comes from the calibration; the all-reduce is a ring: 2(n-1) messages
// of latency each and 2(n-1)/n of the gradient's bytes per rank over a link's
// bandwidth. The step is the slowest worker's compute plus the all-reduce.
//
// The policy is the real one (script/policy_host.hpp) on the real timing: iteration
// t's stats are decided on during t+1 and the plan applies from t+2. Its cost is
// measured, not simulated. The run directory gets the same trace, Perfetto file and
// summary as a real run (with "simulated": true and the ideal throughput: every
// worker's own samples/s, summed), so the reports work on both.
#include "engine/train/config.hpp"
#include "engine/train/plan_policy.hpp"
#include "engine/train/record/run_recorder.hpp"

namespace tandem {

struct SimSummary {
  RunSummary run;
  double ideal_samples_per_s = 0.0;  // each worker alone at an equal share, summed
  double policy_ms = 0.0;            // time spent in the policy (real)
  int64_t plan_changes = 0;
};

// Simulates cfg.workers workers for the experiment's iterations. machine: this
// machine's compute calibration (the emulation's reference); param_count: the
// model's parameters (the all-reduce's size). policy may be null (the plan stays).
SimSummary simulate(const ExperimentConfig& cfg, const DeviceProfile& machine, size_t param_count,
                    int64_t iterations_per_epoch, PlanPolicy* policy);

}  // namespace tandem
