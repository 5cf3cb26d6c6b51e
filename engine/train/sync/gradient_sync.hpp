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
// A CPU worker whose transport gains by overlap (MPI between hosts) sums the buffer
// in buckets started during the backward pass (gradient_buckets.hpp; comm.bucket_mb):
// the control floats then come first, so the last bucket carries them.
#include <cstddef>
#include <memory>
#include <vector>

#include "engine/core/tensor.hpp"
#include "engine/dist/comm.hpp"
#include "engine/nn/model.hpp"
#include "engine/train/control.hpp"

namespace tandem {

class GradientBuckets;

class GradientSync {
public:
  // bucket_mb: comm.bucket_mb (0: one all-reduce after the backward pass); wire:
  // comm.dtype (bf16 sums in buckets, one bucket if need be); timeout_s: how long the
  // buckets' sums may take once every rank arrived.
  GradientSync(Model& model, Comm& comm, double bucket_mb = 0.0, Wire wire = Wire::fp32, double timeout_s = 300.0);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Arrival (the wait for the slowest rank, into *idle_ms), then the sum of the
  // gradients and of every rank's part of the control message (ControlWire);
  // returns the message every rank now holds.
  Control run(const Control& mine, double* idle_ms, const char* what);
  // The floats one all-reduce carries (for Comm::prepare_allreduce).
  size_t floats() const { return count_; }
  // Which of the cases above, for the log.
  std::string path() const;
  // Whether gradients cross the wire in bfloat16 (comm.dtype = 'bf16' where it applies).
  bool bf16_wire() const { return wire_used_ == Wire::bf16; }
  // With buckets: what a training pass tells as the gradients become final
  // (StepContext::grads_ready), after begin_step(); null without.
  GradientsReady* readiness();
  // With buckets: the gradients from `offset` on are final, told after the compute
  // whose whole gradient's norm local_grad_sq() took (an emulated device's pace).
  void hand_ready_from(size_t offset);
  void begin_step();
  // This rank's gradient's squared norm after its compute (before run()): with
  // buckets, the buckets handed over were measured as they left.
  double local_grad_sq();
  // When the last run() ended for all ranks alike (Comm::last_sync_end_ms).
  double last_sync_end_ms() const;
  // With buckets, their sums at the last run(): when the first started and the last
  // was seen done (now_ms() clock; they start and complete in order), and how many,
  // for the trace; count 0 without.
  struct BucketSums {
    double start_ms = 0.0, end_ms = 0.0;
    int64_t count = 0;
  };
  BucketSums bucket_sums() const;

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
  size_t control_at_ = 0;            // host: where the control floats start in buffer_
  std::unique_ptr<GradientBuckets> buckets_;
  Wire wire_used_ = Wire::fp32;
  double sync_end_ms_ = 0.0;         // with buckets: when the last run() ended
};

}  // namespace tandem
