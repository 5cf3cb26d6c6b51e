#include "engine/train/sync/bucket_plan.hpp"

namespace tandem {

std::vector<Bucket> plan_buckets(const std::vector<size_t>& ready_points, size_t control, size_t params,
                                 double bytes) {
  std::vector<Bucket> out;
  size_t end = params;  // gradient offsets until the end
  if (bytes > 0) {
    for (size_t point : ready_points) {
      if (point == 0 || point >= end) continue;  // 0: what is left is the last bucket
      if (static_cast<double>(end - point) * sizeof(float) < bytes) continue;
      out.push_back({control + point, control + end});
      end = point;
    }
  }
  out.push_back({0, control + end});
  return out;
}

}  // namespace tandem
