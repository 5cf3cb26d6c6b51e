#pragma once
// How a gradient buffer is cut into buckets (engine/train/sync/gradient_buckets.hpp):
// shared by the buckets themselves and the simulator's network (engine/sim).
#include <cstddef>
#include <vector>

namespace tandem {

// [begin, end) of the buffer (control floats, then gradients).
struct Bucket {
  size_t begin = 0, end = 0;
};

// The buckets of a buffer of `control` floats then `params` gradients, cut at the
// ready points (Model::gradient_ready_points: descending gradient offsets) once a
// bucket holds at least `bytes`. The first ends the buffer (the backward pass
// finishes it first), the last starts at 0 (the first layers, and the control). A
// layer is never split: one larger than `bytes` is a bucket of its own. bytes <= 0:
// one bucket, the whole buffer.
std::vector<Bucket> plan_buckets(const std::vector<size_t>& ready_points, size_t control, size_t params,
                                 double bytes);

}  // namespace tandem
