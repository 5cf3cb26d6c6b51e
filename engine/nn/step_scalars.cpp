#include "engine/nn/step_scalars.hpp"

#include "engine/core/error.hpp"

namespace tandem {

namespace {
constexpr int64_t kFloats = kStepSlots * static_cast<int64_t>(sizeof(double) / sizeof(float));
}  // namespace

double* StepScalars::on(Device& dev) {
  if (!buffer_.defined() || &buffer_.device() != &dev) {
    buffer_ = Tensor(dev, {kFloats});
    dev.fill(buffer_.data(), static_cast<size_t>(kFloats), 0.0f);  // all-zero bits: every double 0
  }
  return reinterpret_cast<double*>(buffer_.data());
}

void StepScalars::write(Device& dev, int first, const double* values, int count) {
  TANDEM_CHECK(first >= 0 && count >= 0 && first + count <= kStepSlots, "step scalars [", first, ", ", first + count,
               ") written, of ", static_cast<int>(kStepSlots), " (a bug in tandem)");
  dev.write_doubles(on(dev) + first, values, count);
}

}  // namespace tandem
