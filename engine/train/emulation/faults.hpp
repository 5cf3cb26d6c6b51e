#pragma once
// Injected failures, for the reliability tests (experiment key `faults`): at a given
// iteration a rank kills itself (SIGKILL: a crashed or OOM-killed worker), stops
// itself (SIGSTOP: a hung worker, still holding its connections), or puts a NaN in
// its gradient (a numerical blow-up on one worker). Where: in the step's compute,
// in the gradient all-reduce (the others are already waiting in it), or half-way
// through writing a checkpoint (rank 0 writes them; another rank dies at that
// moment). Real signals, not simulated ones: the test is whether the rest of the job
// notices within its deadline, names the rank and leaves the checkpoints intact.
#include <cstdint>
#include <vector>

#include "engine/train/config.hpp"

namespace tandem {

class FaultInjector {
public:
  FaultInjector(const std::vector<FaultConfig>& faults, int rank);
  // Kills or stops this rank when a fault is due at (iteration, during).
  void at(int64_t iteration, const char* during) const;
  // Whether this rank's gradient gets a NaN at the iteration.
  bool nan_at(int64_t iteration) const;
  bool any() const { return !mine_.empty(); }

private:
  std::vector<FaultConfig> mine_;
  int rank_;
};

}  // namespace tandem
