#include "engine/sim/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/rng.hpp"

namespace tandem {

namespace {

// A factor with mean 1 for (seed, worker, iteration): counter-based, so any run of
// the same experiment sees the same noise. sim.noise sets the spread:
//   lognormal  exp(s z - s^2/2): multiplicative jitter, right-skewed (the default:
//              measured step times of a busy host look like this);
//   normal     1 + s z, symmetric;
//   uniform    1 + s sqrt(3) (2u - 1): standard deviation s, bounded;
//   spikes     (1 - s) + Exp(s): mostly just under the mean, an exponential tail
//              of occasional long steps (a time slice lost to another process).
// The symmetric ones are floored at 0.05 (a time is never negative); keep s below
// ~0.3 for them, or the floor lifts the mean.
double noise_factor(const SimConfig& c, int worker, int64_t iteration) {
  if (c.noise <= 0.0) return 1.0;
  Rng rng(mix_seed(mix_seed(c.seed, static_cast<uint64_t>(worker)), static_cast<uint64_t>(iteration)));
  const double s = c.noise;
  const std::string& d = c.noise_distribution;
  if (d == "normal") return std::max(0.05, 1.0 + s * rng.normal());
  if (d == "uniform") return std::max(0.05, 1.0 + s * std::sqrt(3.0) * (2.0 * rng.uniform() - 1.0));
  if (d == "spikes") {
    // 1 - u in (0, 1]: the log is finite.
    const double excess = -s * std::log(1.0 - static_cast<double>(rng.uniform()));
    return std::max(0.05, 1.0 - s) + excess;
  }
  return std::exp(s * rng.normal() - 0.5 * s * s);
}

}  // namespace

ComputeModel::ComputeModel(const SimConfig& sim, const Emulator& emulator, const DeviceProfile& machine)
    : sim_(sim), emulator_(emulator), machine_(machine) {}

void ComputeModel::step(int r, int64_t t, int64_t local_batch, WorkerStats& w) const {
  const double b = static_cast<double>(local_batch);
  const double real = profile_ms(machine_, b);
  w.real_compute_ms = real;
  w.compute_ms = local_batch > 0 ? emulator_.stretch(r, t, local_batch, real).target_ms * noise_factor(sim_, r, t) : 0.0;
  w.data_ms = host_profile_ms(machine_, b);
  w.speed = emulator_.speed(r, t);
}

double ComputeModel::ideal_samples_per_s(int workers, int64_t global_batch) const {
  const int64_t share = std::max<int64_t>(1, global_batch / workers);
  const double b = static_cast<double>(share);
  double total = 0.0;
  for (int r = 0; r < workers; ++r) {
    const double ms = host_profile_ms(machine_, b) + emulator_.stretch(r, 0, share, profile_ms(machine_, b)).target_ms;
    total += b / (ms / 1000.0);
  }
  return total;
}

}  // namespace tandem
