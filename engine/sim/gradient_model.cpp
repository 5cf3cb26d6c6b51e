#include "engine/sim/gradient_model.hpp"

#include "engine/core/rng.hpp"
#include "engine/sim/noise.hpp"

namespace tandem {

GradientModel::GradientModel(const SimConfig& sim, int64_t per_epoch, int64_t base_batch)
    : sim_(sim), epoch_samples_(static_cast<double>(per_epoch) * static_cast<double>(base_batch)),
      base_batch_(base_batch), seed_(mix_seed(sim.seed, 0x6772616473ULL)) {}

double GradientModel::noise_scale(int64_t samples) const {
  const double epochs = epoch_samples_ > 0 ? static_cast<double>(samples) / epoch_samples_ : 0.0;
  return sim_.noise_scale * (1.0 + sim_.noise_growth * epochs);
}

double GradientModel::efficiency(int64_t global_batch, int64_t samples) const {
  if (!modelled()) return 1.0;
  const double phi = noise_scale(samples);
  return (phi + static_cast<double>(base_batch_)) / (phi + static_cast<double>(global_batch));
}

double GradientModel::fill(int64_t t, int64_t samples, std::vector<WorkerStats>& workers) const {
  if (!modelled()) return -1.0;
  const double trace = noise_scale(samples);  // tr(Sigma), with |G|^2 = 1
  int64_t global_batch = 0;
  for (WorkerStats& w : workers) {
    global_batch += w.local_batch;
    // A worker without samples has no gradient (bsp_step.cpp leaves it 0 too).
    w.grad_sq = w.local_batch > 0 ? (1.0 + trace / static_cast<double>(w.local_batch)) *
                                        noise_factor(sim_, seed_, w.rank, t)
                                  : 0.0;
  }
  const int cluster = static_cast<int>(workers.size());  // the all-reduced gradient's own stream
  return (1.0 + trace / static_cast<double>(global_batch)) * noise_factor(sim_, seed_, cluster, t);
}

}  // namespace tandem
