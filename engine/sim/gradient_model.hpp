#pragma once
// The simulator's gradients. A simulated cluster computes none, so the gradient
// noise a policy estimates (the workers' grad_sq and the cluster's global_grad_sq,
// as bsp_step.cpp fills them in a real run) comes from a model: the gradient noise
// scale B_noise = tr(Sigma) / |G|^2 (McCandlish et al. 2018, "An Empirical Model of
// Large-Batch Training") starts at sim.noise_scale and grows linearly with the
// epochs e done, B_noise(e) = sim.noise_scale (1 + sim.noise_growth e) (McCandlish
// et al. observe it growing as training goes on, as the loss falls). With |G|^2 = 1
// and tr(Sigma) = B_noise, the mean gradient of b samples has the expected squared
// norm |G|^2 + tr(Sigma) / b: that is worker r's grad_sq (b = its local batch) and
// the cluster's global_grad_sq (b = the global batch B), each times a mean-1 factor
// of sim.noise (noise.hpp, a stream of its own) so an estimator has noise to smooth;
// with sim.noise = 0 they are the expected values exactly. The two-batch estimator
// (engine/train/noise_scale.hpp, the star and goodput policies) then recovers
// B_noise(e).
//
// Pollux's statistical efficiency of a global batch B against the experiment's B0
// (Qiao et al. 2021, "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized
// Deep Learning"), E(B) = (B_noise + B0) / (B_noise + B): the progress a sample
// makes at B against one at B0. The summary's goodput counts samples by it.
#include <cstdint>
#include <vector>

#include "engine/train/config.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

class GradientModel {
public:
  // per_epoch: global batches of B0 in an epoch; base_batch: B0.
  GradientModel(const SimConfig& sim, int64_t per_epoch, int64_t base_batch);

  bool modelled() const { return sim_.noise_scale > 0.0; }
  // B_noise once `samples` samples are drawn (e = samples / (per_epoch B0)).
  double noise_scale(int64_t samples) const;
  // E(B) at B_noise(samples); 1 at B0, and wherever the noise is not modelled.
  double efficiency(int64_t global_batch, int64_t samples) const;
  // Iteration t's gradient norms, its global batch drawn after `samples` samples:
  // sets every worker's grad_sq (by its local batch) and returns global_grad_sq.
  // Does nothing and returns -1 (not measured) when the noise is not modelled.
  double fill(int64_t t, int64_t samples, std::vector<WorkerStats>& workers) const;

private:
  const SimConfig& sim_;
  double epoch_samples_;  // per_epoch B0
  int64_t base_batch_;
  uint64_t seed_;  // the gradient noise's stream
};

}  // namespace tandem
