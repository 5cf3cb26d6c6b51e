#pragma once
// Sums the flat gradient buffer, with the control tail riding after it, over every
// rank. Where the buffer lives and where the transport wants it can differ:
//   - a CPU worker hands its host buffer to the transport as it is;
//   - a GPU worker on NCCL hands over device memory, and only the few control
//     floats cross to the host and back;
//   - a GPU worker on a host transport (MPI: ranks sharing one GPU, clusters that
//     mix GPU and CPU workers) stages the whole buffer through pinned host memory.
// The trainer writes the control values into tail() before run() and reads their
// sums there after, whichever case holds.
#include <cstddef>
#include <vector>

#include "engine/dist/comm.hpp"
#include "engine/nn/model.hpp"

namespace tandem {

class GradientSync {
public:
  GradientSync(Model& model, Comm& comm, size_t tail_count);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  float* tail() { return tail_; }
  // Arrival (the wait for the slowest rank, into *idle_ms) and the sum.
  void run(double* idle_ms, const char* what);
  // Which of the three cases above, for the log.
  const char* path() const;

private:
  enum class Path { host, device, staged };
  Model& model_;
  Comm& comm_;
  Device& dev_;
  size_t tail_count_, count_;
  Path path_;
  float* tail_ = nullptr;
  float* staging_ = nullptr;      // staged: the whole buffer on the host
  std::vector<float> tail_host_;  // device: the control floats
};

}  // namespace tandem
