#include "engine/train/sync/gradient_sync.hpp"

#include "engine/core/error.hpp"

namespace tandem {

GradientSync::GradientSync(Model& model, Comm& comm, size_t tail_count)
    : model_(model), comm_(comm), dev_(model.device()), tail_count_(tail_count),
      count_(model.grads_with_tail_count()) {
  TANDEM_CHECK(tail_count <= count_, "the control tail (", tail_count, " floats) does not fit the gradient buffer (",
               count_, " floats)");
  if (dev_.kind() == DeviceKind::cpu) {
    TANDEM_CHECK_HINT(!comm.device_memory(), "run CPU workers over MPI", "a CPU worker was given the ", comm.name(),
                      " transport, which all-reduces GPU memory only");
    path_ = Path::host;
    tail_ = model.grad_tail();
  } else if (comm.device_memory()) {
    path_ = Path::device;
    tail_host_.assign(tail_count, 0.0f);
    tail_ = tail_host_.data();
  } else {
    path_ = Path::staged;
    staging_ = static_cast<float*>(dev_.allocate_host(count_ * sizeof(float)));
    tail_ = staging_ + (count_ - tail_count_);
  }
}

GradientSync::~GradientSync() {
  if (staging_) dev_.deallocate_host(staging_, count_ * sizeof(float));
}

const char* GradientSync::path() const {
  switch (path_) {
    case Path::host: return "host memory";
    case Path::device: return "GPU memory";
    case Path::staged: return "GPU memory staged through pinned host memory";
  }
  return "?";
}

void GradientSync::run(double* idle_ms, const char* what) {
  switch (path_) {
    case Path::host:
      comm_.arrive_and_allreduce(model_.grads_with_tail(), count_, idle_ms, what);
      return;
    case Path::device:
      dev_.copy_from_host(model_.grad_tail(), tail_, tail_count_);
      comm_.arrive_and_allreduce(model_.grads_with_tail(), count_, idle_ms, what);
      dev_.copy_to_host(tail_, model_.grad_tail(), tail_count_);
      return;
    case Path::staged: {
      // The gradients come over; the tail is already in the staging buffer.
      const size_t grads = count_ - tail_count_;
      dev_.copy_to_host(staging_, model_.grads_with_tail(), grads);
      comm_.arrive_and_allreduce(staging_, count_, idle_ms, what);
      dev_.copy_from_host(model_.grads_with_tail(), staging_, grads);
      return;
    }
  }
}

}  // namespace tandem
