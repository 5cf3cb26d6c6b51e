#pragma once
// The simulator's network: an all-reduce is a ring, 2(m-1) messages of
// sim.latency_us each and 2(m-1)/m of the bytes per rank over a link of
// sim.bandwidth_gb_s, plus the slowest emulated link delay; a parameter server's
// round trip is the gradient there and the weights back, a message each way.
#include <cstddef>

#include "engine/train/config.hpp"
#include "engine/train/emulation/emulator.hpp"

namespace tandem {

class NetworkModel {
public:
  // param_count: the model's parameters (the gradient's size).
  NetworkModel(const SimConfig& sim, const Emulator& emulator, int workers, size_t param_count);

  double gradient_bytes() const { return gradient_bytes_; }
  // A ring all-reduce of `bytes` among `members` ranks (0 for one).
  double ring_ms(int members, double bytes) const;
  // The gradients' all-reduce among every worker: a bsp step's communication.
  double allreduce_ms() const { return ring_ms(workers_, gradient_bytes_); }
  // A push of the gradients to the parameter server and its reply.
  double server_ms() const;

private:
  const SimConfig& sim_;
  int workers_;
  double gradient_bytes_;
  double link_delay_ms_ = 0.0;  // the slowest worker's emulated delay, on every collective
};

}  // namespace tandem
