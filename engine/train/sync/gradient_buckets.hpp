#pragma once
// Gradient buckets (issue 36; PyTorch DDP's reducer, Li et al., VLDB 2020): the
// gradient buffer all-reduced in pieces, each started as soon as the backward pass
// has finished it, while the backward pass goes on with the layers before; the update
// waits for all of them. tandem's balancing makes every worker finish its backward
// pass together, which is when buckets hide best: most of the sum is done by then.
//
// Layout (GradientSync): the buffer holds the control floats first, then the
// gradients. The backward pass finishes the gradients from the end (the last layer's
// first), so the first bucket ends the buffer and the last one starts at 0: it holds
// the first layers' gradients and the Control, written once the compute is done. The
// Control rides in the last bucket as it rode in the one all-reduce, at no round trip
// of its own.
//
// Threads: the rank's thread tells which gradients are final (Model::backward through
// GradientsReady), computes each bucket's squared norm (the finite check and the
// policy's noise estimate want this rank's own) and hands the bucket over. A
// communication thread starts the handed buckets' sums, in order (every rank starts
// the same ones in the same order), and moves them on (AsyncAllreduce), sleeping
// between polls so it takes little of a core the compute wants. A bucket handed over
// belongs to the communication thread until finish() returns: the two threads never
// touch the same floats.
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/dist/comm.hpp"
#include "engine/nn/layer.hpp"
#include "engine/train/sync/bucket_plan.hpp"

namespace tandem {

class GradientBuckets final : public GradientsReady {
public:
  // buffer: `control` floats then the gradients; buckets: plan_buckets' answer;
  // timeout_s: how long finish() waits for the sums (collective_timeout_s).
  GradientBuckets(std::unique_ptr<AsyncAllreduce> sums, Device& dev, float* buffer, size_t control,
                  std::vector<Bucket> buckets, double timeout_s);
  ~GradientBuckets() override;
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // A step's backward pass begins: nothing is handed over.
  void begin();
  // Model::backward: the gradients from `offset` on are final; hands over every bucket
  // that lies within them, but the last (it waits for the control: finish()).
  void ready_from(size_t offset) override { hand_from(offset, true); }
  // The same without taking the buckets' norms: the caller took the whole gradient's
  // (an emulated device tells its buckets after its real compute: bsp_step.cpp).
  void hand_ready_from(size_t offset) { hand_from(offset, false); }
  // The squared norm of this rank's gradients in the buckets handed over so far ...
  double handed_sq() const { return handed_sq_; }
  // ... and the gradients before them, [0, unhanded()), which are the caller's.
  size_t unhanded() const;
  // The control is written: hands over the last bucket and any the backward pass did
  // not tell (each bucket's norm is then not counted: ask before).
  void hand_rest();
  // Waits until every bucket is summed (after hand_rest). Throws a tandem::Error past
  // the deadline or when a sum failed.
  void finish(const char* what);
  size_t count() const { return buckets_.size(); }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // When each bucket's sum started and was seen complete at the last step (now_ms()
  // clock), for the trace's gradient-sync track.
  struct Span {
    double start_ms = 0.0, end_ms = 0.0;
  };
  std::vector<Span> spans() const;

  // Whether sums were handed over and not seen complete (a step that failed).
  bool in_flight() const;

private:
  void hand_from(size_t offset, bool measure);
  void hand(size_t upto);  // hands buckets [handed_, upto) over
  void run();              // the communication thread

  std::unique_ptr<AsyncAllreduce> sums_;
  Device& dev_;
  float* buffer_;
  size_t control_;
  std::vector<Bucket> buckets_;
  double timeout_s_;
  double handed_sq_ = 0.0;  // the rank's thread's alone
  bool begun_ = false;      // begin() since the last finish() (the rank's thread's alone)

  mutable std::mutex mu_;
  std::condition_variable work_, done_;
  size_t handed_ = 0, started_ = 0, completed_ = 0;  // buckets, in order
  std::vector<Span> spans_;
  std::string error_;  // a sum that failed, said by the communication thread
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tandem
