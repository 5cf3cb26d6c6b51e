#include "engine/sim/compute_model.hpp"

#include <algorithm>

#include "engine/sim/noise.hpp"

namespace tandem {

ComputeModel::ComputeModel(const SimConfig& sim, const Emulator& emulator, const DeviceProfile& machine)
    : sim_(sim), emulator_(emulator), machine_(machine) {}

void ComputeModel::step(int r, int64_t t, int64_t local_batch, WorkerStats& w, int64_t micro) const {
  const double b = static_cast<double>(local_batch);
  const double real = profile_ms(machine_, local_batch, micro);
  w.real_compute_ms = real;
  w.micro_batches = std::max<int64_t>(1, std::min(micro, local_batch));
  const double noise = noise_factor(sim_, sim_.seed, r, t);
  w.compute_ms = local_batch > 0 ? emulator_.stretch(r, t, local_batch, real, micro).target_ms * noise : 0.0;
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
