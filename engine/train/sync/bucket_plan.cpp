#include "engine/train/sync/bucket_plan.hpp"

#include <algorithm>

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

double ready_fraction(size_t offset, size_t params, double backward_share, int64_t passes) {
  if (params == 0) return 1.0;
  const double unfinished = static_cast<double>(std::min(offset, params)) / static_cast<double>(params);
  return 1.0 - backward_share * unfinished / static_cast<double>(std::max<int64_t>(passes, 1));
}

}  // namespace tandem
