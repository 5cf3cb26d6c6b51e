#include "engine/train/sync/gradient_sync.hpp"

#include "engine/core/error.hpp"

namespace tandem {

GradientSync::GradientSync(Model& model, Comm& comm)
    : model_(model), comm_(comm), dev_(model.device()), wire_(comm.size()), params_(model.param_count()),
      count_(params_ + wire_.floats()) {
  if (dev_.kind() == DeviceKind::cpu) {
    TANDEM_CHECK_HINT(!comm.device_memory(), "run CPU workers over MPI", "a CPU worker was given the ", comm.name(),
                      " transport, which all-reduces GPU memory only");
    path_ = Path::host;
  } else {
    path_ = comm.device_memory() ? Path::device : Path::staged;
  }
  if (path_ == Path::staged) {
    staging_ = static_cast<float*>(dev_.allocate_host(count_ * sizeof(float)));
  } else {
    // The gradients move into this buffer, the control floats right behind them.
    buffer_ = Tensor(dev_, {static_cast<int64_t>(count_)});
    model_.place_grads(buffer_.data());
  }
  control_host_.assign(wire_.floats(), 0.0f);
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

Control GradientSync::run(const Control& mine, double* idle_ms, const char* what) {
  const int rank = comm_.rank();
  if (comm_.size() == 1) {  // nothing to sum: the message is this rank's own
    wire_.encode(mine, rank, control_host_.data());
    return wire_.decode(control_host_.data());
  }
  switch (path_) {
    case Path::host: {
      float* control = buffer_.data() + params_;
      wire_.encode(mine, rank, control);
      comm_.arrive_and_allreduce(buffer_.data(), count_, idle_ms, what);
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
