#include "engine/sim/network_model.hpp"

#include <algorithm>

namespace tandem {

NetworkModel::NetworkModel(const SimConfig& sim, const CommConfig& comm, const Emulator& emulator, int workers,
                           const GradientLayout& layout)
    : sim_(sim), workers_(workers),
      ring_members_(static_cast<int>((workers + sim.ranks_per_host - 1) / std::max<int64_t>(sim.ranks_per_host, 1))),
      gradient_bytes_(static_cast<double>(layout.floats) * sizeof(float)),
      bf16_(comm.dtype == "bf16"), params_(layout.params), control_(layout.floats - layout.params),
      backward_share_(layout.backward_share) {
  for (int r = 0; r < workers; ++r) link_delay_ms_ = std::max(link_delay_ms_, emulator.comm_delay_ms(r));
  buckets_ = plan_buckets(layout.ready_points, control_, layout.params, comm.bucket_mb * 1024.0 * 1024.0);
}

double NetworkModel::transfer_ms(int members, double bytes) const {
  return members <= 1 ? 0.0
                      : 2.0 * (members - 1) * sim_.latency_us / 1000.0 +
                            2.0 * (members - 1) / members * bytes / (sim_.bandwidth_gb_s * 1e9) * 1000.0;
}

double NetworkModel::ring_ms(int members, double bytes) const {
  return members <= 1 ? 0.0 : transfer_ms(members, bytes) + link_delay_ms_;
}

NetworkModel::Sums NetworkModel::bucket_sums(const std::vector<double>& compute_ms,
                                             const std::vector<int64_t>& passes) const {
  Sums out;
  double done = 0.0;  // when the rings before this bucket's are done
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = buckets_[k];
    // When every worker's backward pass has finished this bucket: its gradients from
    // its first one to the end (the last bucket: all of them, and the control).
    const size_t from = k + 1 == buckets_.size() ? 0 : b.begin - control_;
    double ready = 0.0;
    for (size_t r = 0; r < compute_ms.size(); ++r)
      ready = std::max(ready, compute_ms[r] * ready_fraction(from, params_, backward_share_,
                                                             r < passes.size() ? passes[r] : 1));
    const double start = std::max(ready, done);
    if (k == 0) out.first_start_ms = start;
    done = start + transfer_ms(ring_members_, wire_bytes(static_cast<double>(b.end - b.begin) * sizeof(float)));
  }
  // The emulated link delay is slept once a step, after the last bucket (bsp_step).
  out.end_ms = done + (ring_members_ > 1 ? link_delay_ms_ : 0.0);
  return out;
}

double NetworkModel::server_ms() const {
  return 2.0 * (sim_.latency_us / 1000.0 + gradient_bytes_ / (sim_.bandwidth_gb_s * 1e9) * 1000.0);
}

}  // namespace tandem
