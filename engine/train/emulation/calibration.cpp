#include "engine/train/emulation/calibration.hpp"

#include <algorithm>

#include "engine/core/clock.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"

namespace tandem {

DeviceProfile calibrate_compute(TrainStep& step, BatchLoader& loader, int64_t max_batch, Model& model,
                                const OptimizerConfig& optimizer) {
  constexpr int kRepeats = 5;
  DeviceProfile profile;
  StepContext ctx;
  ctx.update_running_stats = false;  // rank 0 alone: its model must stay as the others' are
  // The optimizer step costs the same at every batch: timed once, on scratch
  // parameters with an optimizer of their own.
  Device& dev = model.device();
  Tensor scratch(dev, model.params().shape());
  const std::unique_ptr<Optimizer> scratch_optimizer = make_optimizer(dev, model, optimizer);
  double optimizer_ms = 1e300;
  for (int i = 0; i < kRepeats + 1; ++i) {
    const double start = now_ms();
    scratch_optimizer->step(scratch, model.grads(), 0.0, 1.0);
    if (i > 0) optimizer_ms = std::min(optimizer_ms, now_ms() - start);
  }
  for (int64_t b = 1;; b = std::min(b * 2, max_batch)) {
    double load_ms = 1e300;
    for (int i = 0; i < kRepeats; ++i) {
      const double start = now_ms();
      loader.load(0, 0, b);
      // Done when the batch is on the device (a GPU gathers or uploads it
      // asynchronously); the wait also keeps the loader's staging ring safe.
      dev.synchronize();
      load_ms = std::min(load_ms, now_ms() - start);
    }
    const Tensor& x = loader.load(0, 0, b);
    step.compute(x, loader.labels(), ctx);  // warm-up: buffers sized, caches filled
    double best = 1e300;
    for (int i = 0; i < kRepeats; ++i) {
      const double start = now_ms();
      step.compute(x, loader.labels(), ctx);
      best = std::min(best, now_ms() - start);
    }
    profile.batch.push_back(static_cast<double>(b));
    profile.ms.push_back(best);
    profile.host_ms.push_back(load_ms + optimizer_ms);
    profile.memory_mb.push_back(static_cast<double>(dev.bytes_in_use()) / (1024.0 * 1024.0));
    if (b == max_batch) break;
  }
  return profile;
}

}  // namespace tandem
