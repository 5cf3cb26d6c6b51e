#include "engine/sim/network_model.hpp"

#include <algorithm>

namespace tandem {

NetworkModel::NetworkModel(const SimConfig& sim, const Emulator& emulator, int workers, size_t param_count)
    : sim_(sim), workers_(workers), gradient_bytes_(static_cast<double>(param_count) * sizeof(float)) {
  for (int r = 0; r < workers; ++r) link_delay_ms_ = std::max(link_delay_ms_, emulator.comm_delay_ms(r));
}

double NetworkModel::ring_ms(int members, double bytes) const {
  return members <= 1 ? 0.0
                      : 2.0 * (members - 1) * sim_.latency_us / 1000.0 +
                            2.0 * (members - 1) / members * bytes / (sim_.bandwidth_gb_s * 1e9) * 1000.0 +
                            link_delay_ms_;
}

double NetworkModel::server_ms() const {
  return 2.0 * (sim_.latency_us / 1000.0 + gradient_bytes_ / (sim_.bandwidth_gb_s * 1e9) * 1000.0);
}

}  // namespace tandem
