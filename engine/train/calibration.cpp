#include "engine/train/calibration.hpp"

#include <algorithm>

#include "engine/core/clock.hpp"

namespace tandem {

DeviceProfile calibrate_compute(TrainStep& step, BatchLoader& loader, int64_t max_batch) {
  constexpr int kRepeats = 5;
  DeviceProfile profile;
  StepContext ctx;
  for (int64_t b = 1;; b = std::min(b * 2, max_batch)) {
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
    if (b == max_batch) break;
  }
  return profile;
}

}  // namespace tandem
