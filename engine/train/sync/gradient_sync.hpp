#pragma once
// The bsp gradient sync: every rank's flat gradient buffer summed over all ranks,
// with the iteration's Control (control.hpp) riding in the same collective so the
// boundary's decisions cost no round trip of their own. This component owns that
// arrangement: it keeps the model's gradients in one buffer of its own, followed by
// the control message's floats, and hands the transport what it wants:
//   - a CPU worker hands its host buffer to the transport as it is;
//   - a GPU worker on NCCL hands over device memory, and only the few control
//     floats cross to the host and back;
//   - a GPU worker on a host transport (MPI: ranks sharing one GPU, clusters that
//     mix GPU and CPU workers) stages the whole buffer through pinned host memory.
#include <cstddef>
#include <vector>

#include "engine/core/tensor.hpp"
#include "engine/dist/comm.hpp"
#include "engine/nn/model.hpp"
#include "engine/train/control.hpp"

namespace tandem {

class GradientSync {
public:
  GradientSync(Model& model, Comm& comm);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Arrival (the wait for the slowest rank, into *idle_ms), then the sum of the
  // gradients and of every rank's part of the control message (ControlWire);
  // returns the message every rank now holds.
  Control run(const Control& mine, double* idle_ms, const char* what);
  // The floats one all-reduce carries (for Comm::prepare_allreduce).
  size_t floats() const { return count_; }
  // Which of the three cases above, for the log.
  const char* path() const;

private:
  enum class Path { host, device, staged };
  Model& model_;
  Comm& comm_;
  Device& dev_;
  ControlWire wire_;
  size_t params_, count_;
  Path path_;
  Tensor buffer_;                    // host, device: the gradients, then the control floats
  float* staging_ = nullptr;         // staged: the whole buffer on the host
  std::vector<float> control_host_;  // device, one rank: the control floats on the host
};

}  // namespace tandem
