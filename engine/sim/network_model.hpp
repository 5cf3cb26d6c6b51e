#pragma once
// The simulator's network: an all-reduce is a ring, 2(m-1) messages of
// sim.latency_us each and 2(m-1)/m of the bytes per rank over a link of
// sim.bandwidth_gb_s, plus the slowest emulated link delay; a parameter server's
// round trip is the gradient there and the weights back, a message each way.
//
// A bsp step's gradients go as a real run's go between hosts (the simulated cluster's
// workers are on a network): in gradient buckets (comm.bucket_mb,
// engine/train/sync/gradient_buckets.hpp) where the model makes more than one, each
// bucket's ring starting once every worker's backward pass has finished it and the
// rings before it are done; in bfloat16 (comm.dtype), half the bytes; with several
// workers a host (sim.ranks_per_host) in two levels, the ring across hosts only (the
// host's sum in its memory is taken as free).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/train/config.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/sync/bucket_plan.hpp"

namespace tandem {

// What a step's all-reduce carries and when the backward pass finishes it.
struct GradientLayout {
  size_t floats = 0;                 // the gradients and the control beside them
  size_t params = 0;                 // the gradients alone
  std::vector<size_t> ready_points;  // Model::gradient_ready_points
  // The backward pass's share of a training step's compute (its FLOPs'): it finishes
  // the gradients, from the end, at a pace proportional to their count.
  double backward_share = 2.0 / 3.0;
};

class NetworkModel {
public:
  NetworkModel(const SimConfig& sim, const CommConfig& comm, const Emulator& emulator, int workers,
               const GradientLayout& layout);

  double gradient_bytes() const { return gradient_bytes_; }
  // A ring all-reduce of `bytes` among `members` ranks (0 for one).
  double ring_ms(int members, double bytes) const;
  // The gradients' all-reduce among every worker after the backward pass, on the wire
  // comm.dtype says: a ring among the hosts where sim.ranks_per_host > 1 (two levels).
  double allreduce_ms() const { return ring_ms(ring_members_, wire_bytes(gradient_bytes_)); }
  // Whether a bsp step sums in buckets during the backward pass (more than one bucket).
  bool bucketed() const { return workers_ > 1 && buckets_.size() > 1; }
  size_t buckets() const { return buckets_.size(); }
  // Bucketed: given each worker's compute (from the step's start) and its micro-batches
  // (1 where not given), when the first bucket's ring starts and the last one's ends.
  struct Sums {
    double first_start_ms = 0.0, end_ms = 0.0;
  };
  Sums bucket_sums(const std::vector<double>& compute_ms, const std::vector<int64_t>& passes = {}) const;
  // A push of the gradients to the parameter server and its reply.
  double server_ms() const;

private:
  double wire_bytes(double bytes) const { return bf16_ ? bytes / 2.0 : bytes; }
  // ring_ms without the emulated link delay.
  double transfer_ms(int members, double bytes) const;

  const SimConfig& sim_;
  int workers_;
  int ring_members_;  // the gradients' ring: every worker, or one a host (two levels)
  double gradient_bytes_;
  double link_delay_ms_ = 0.0;  // the slowest worker's emulated delay, on every collective
  bool bf16_;
  size_t params_, control_;
  double backward_share_;
  std::vector<Bucket> buckets_;  // in gradient floats from the buffer's start (control first)
};

}  // namespace tandem
