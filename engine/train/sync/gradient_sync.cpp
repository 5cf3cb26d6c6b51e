#include "engine/train/sync/gradient_sync.hpp"

#include <fmt/format.h>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/train/sync/gradient_buckets.hpp"

namespace tandem {

namespace {
// The control floats ahead of the gradients, rounded up so the gradients keep a
// 64-byte alignment (the GEMMs writing them like it).
size_t padded_control(size_t floats) { return (floats + 15) / 16 * 16; }
}  // namespace

GradientSync::GradientSync(Model& model, Comm& comm, double bucket_mb, Wire wire, double timeout_s)
    : model_(model), comm_(comm), dev_(model.device()), wire_(comm.size()), params_(model.param_count()),
      count_(params_ + wire_.floats()) {
  if (dev_.kind() == DeviceKind::cpu) {
    TANDEM_CHECK_HINT(!comm.device_memory(), "run CPU workers over MPI", "a CPU worker was given the ", comm.name(),
                      " transport, which all-reduces GPU memory only");
    path_ = Path::host;
  } else {
    path_ = comm.device_memory() ? Path::device : Path::staged;
  }
  // Buckets where the transport gains by them (every rank asks: a collective), and
  // where there is more than one: a model smaller than a bucket (DDP's 25 MB) has
  // nothing to overlap, and keeps the one all-reduce unless its wire is bf16 (which
  // the buckets' sums carry).
  const size_t control = padded_control(wire_.floats());
  std::vector<Bucket> plan = plan_buckets(model_.gradient_ready_points(), control, params_,
                                          bucket_mb * 1024.0 * 1024.0);
  std::unique_ptr<AsyncAllreduce> sums;
  if (comm.size() > 1) {
    // Every rank must agree (a cluster may mix CPU and GPU ranks, whose paths differ):
    // the ranks that cannot are counted, and buckets are taken only where none is.
    const bool can = path_ == Path::host && (plan.size() > 1 || wire == Wire::bf16);
    double cannot = can ? 0.0 : 1.0;
    comm.allreduce_sum(&cannot, 1, "agreeing on gradient buckets");
    if (cannot == 0.0) sums = comm.open_async_allreduce("setting up the gradient buckets", wire);
  }
  if (sums) {
    count_ = control + params_;
    buffer_ = Tensor(dev_, {static_cast<int64_t>(count_)});
    dev_.fill(buffer_.data(), control, 0.0f);  // the padding sums to 0
    model_.place_grads(buffer_.data() + control);
    control_at_ = 0;
    buckets_ = std::make_unique<GradientBuckets>(std::move(sums), dev_, buffer_.data(), control, std::move(plan),
                                                 timeout_s);
    wire_used_ = wire;
  } else if (path_ == Path::staged) {
    staging_ = static_cast<float*>(dev_.allocate_host(count_ * sizeof(float)));
  } else {
    // The gradients move into this buffer, the control floats right behind them.
    buffer_ = Tensor(dev_, {static_cast<int64_t>(count_)});
    model_.place_grads(buffer_.data());
    control_at_ = params_;
  }
  control_host_.assign(wire_.floats(), 0.0f);
}

GradientSync::~GradientSync() {
  if (staging_) dev_.deallocate_host(staging_, count_ * sizeof(float));
  // Sums still in flight after a failed step write into the buffer until the job's
  // abort: it stays allocated (GradientBuckets keeps their own buffers).
  if (buckets_ && buckets_->in_flight()) static_cast<void>(new Tensor(std::move(buffer_)));
}

std::string GradientSync::path() const {
  switch (path_) {
    case Path::host:
      return buckets_ ? fmt::format("host memory, in {} bucket(s) summed during the backward pass{}", buckets_->count(),
                                    wire_used_ == Wire::bf16 ? ", in bfloat16 on the wire" : "")
                      : "host memory";
    case Path::device: return "GPU memory";
    case Path::staged: return "GPU memory staged through pinned host memory";
  }
  return "?";
}

GradientsReady* GradientSync::readiness() { return buckets_.get(); }

void GradientSync::hand_ready_from(size_t offset) {
  if (buckets_) buckets_->hand_ready_from(offset);
}

void GradientSync::begin_step() {
  if (buckets_) buckets_->begin();
}

double GradientSync::local_grad_sq() {
  if (!buckets_) return dev_.sum_squares(model_.grads().data(), params_);
  return buckets_->handed_sq() + dev_.sum_squares(model_.grads().data(), buckets_->unhanded());
}

double GradientSync::last_sync_end_ms() const { return buckets_ ? sync_end_ms_ : comm_.last_sync_end_ms(); }

GradientSync::BucketSums GradientSync::bucket_sums() const {
  BucketSums out;
  if (!buckets_) return out;
  const std::vector<GradientBuckets::Span> spans = buckets_->spans();
  out.start_ms = spans.front().start_ms;
  out.end_ms = spans.back().end_ms;
  out.count = static_cast<int64_t>(spans.size());
  return out;
}

Control GradientSync::run(const Control& mine, double* idle_ms, const char* what) {
  const int rank = comm_.rank();
  if (comm_.size() == 1) {  // nothing to sum: the message is this rank's own
    wire_.encode(mine, rank, control_host_.data());
    return wire_.decode(control_host_.data());
  }
  switch (path_) {
    case Path::host: {
      float* control = buffer_.data() + control_at_;
      wire_.encode(mine, rank, control);
      if (!buckets_) {
        comm_.arrive_and_allreduce(buffer_.data(), count_, idle_ms, what);
        return wire_.decode(control);
      }
      // The last bucket (with the control) starts now; the arrival (the wait for the
      // slowest rank) is timed apart from what is left of the sums, as without buckets.
      buckets_->hand_rest();
      const double start = now_ms();
      comm_.barrier(what);
      *idle_ms = now_ms() - start;
      buckets_->finish(what);
      sync_end_ms_ = now_ms();
      return wire_.decode(control);
    }
    case Path::device: {
      float* control = buffer_.data() + params_;
      wire_.encode(mine, rank, control_host_.data());
      dev_.copy_from_host(control, control_host_.data(), control_host_.size());
      comm_.arrive_and_allreduce(buffer_.data(), count_, idle_ms, what);
      dev_.copy_to_host(control_host_.data(), control, control_host_.size());
      return wire_.decode(control_host_.data());
    }
    case Path::staged: {
      // The gradients come over from the device; the control is written in place.
      float* control = staging_ + params_;
      dev_.copy_to_host(staging_, model_.grads().data(), params_);
      wire_.encode(mine, rank, control);
      comm_.arrive_and_allreduce(staging_, count_, idle_ms, what);
      dev_.copy_from_host(model_.grads().data(), staging_, params_);
      return wire_.decode(control);
    }
  }
  TANDEM_FAIL("unknown gradient sync path (a bug in tandem)");
}

}  // namespace tandem
