#pragma once
// `tandem sim`: the experiment's policy against a model of the cluster instead of
// training. Each iteration, every worker's compute comes from the compute model
// (compute_model.hpp: the emulation over this machine's calibration, with noise),
// the gradient sync from the network model (network_model.hpp: a ring all-reduce);
// a bsp step is the slowest worker's host part and compute plus the all-reduce, and
// a relaxed sync mode runs a segment at a time (segment_model.hpp). The first plan
// is the one `tandem run` starts from (Plan::initial).
//
// The policy is the real one (script/policy_host.hpp) on the real timing: iteration
// t's stats are decided on during t+1 and the plan applies from t+2. Its cost is
// measured, not simulated. The run directory gets the same trace, Perfetto file and
// summary as a real run (with "simulated": true and the ideal throughput: every
// worker's own samples/s, summed), so the reports work on both.
//
// A plan may change the global batch B (policy.global_batch = {min, max}): each
// iteration computes, counts samples and is traced at its own B; epochs count
// samples (samples drawn / (per_epoch B0)) and, as in the trainer, the run ends once
// stop.epochs' samples are drawn. The gradient noise a policy estimates from
// grad_sq comes from gradient_model.hpp (sim.noise_scale), and the summary's goodput
// compares fixed and adaptive batches (batch_tally.hpp).
#include <optional>

#include "engine/sim/network_model.hpp"
#include "engine/train/config.hpp"
#include "engine/train/plan_policy.hpp"
#include "engine/train/record/run_recorder.hpp"

namespace tandem {

struct SimSummary {
  RunSummary run;
  // Each worker alone at an equal share, summed (with B changing: the samples over
  // their time at the ideal throughput of each iteration's B).
  double ideal_samples_per_s = 0.0;
  double policy_ms = 0.0;            // time spent in the policy (real)
  int64_t plan_changes = 0;   // plans the policy decided (summary.json's policy.plan_changes too)
  int64_t plans_applied = 0;  // ... of which in force before the run ended
  // Set when a plan changed the global batch or the gradient noise is modelled
  // (sim.noise_scale): the mean B over the iterations, and with the noise modelled
  // goodput (samples/s times the samples' mean statistical efficiency, batch_tally.hpp),
  // that mean efficiency and the noise scale at the end.
  std::optional<double> mean_global_batch, goodput, statistical_efficiency, noise_scale_end;
};

// Simulates cfg.workers workers for the experiment's iterations. machine: this
// machine's compute calibration (the emulation's reference); layout: what the
// all-reduce carries and when the backward pass finishes it (network_model.hpp).
// policy may be null (the plan stays).
SimSummary simulate(const ExperimentConfig& cfg, const DeviceProfile& machine, const GradientLayout& layout,
                    int64_t iterations_per_epoch, PlanPolicy* policy);

}  // namespace tandem
