#pragma once
// How a gradient buffer is cut into buckets (engine/train/sync/gradient_buckets.hpp):
// shared by the buckets themselves and the simulator's network (engine/sim).
#include <cstddef>
#include <cstdint>
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

// When the gradients from `offset` to the end of `params` are final, as a fraction of a
// step's compute: the backward pass takes `backward_share` of each of the step's
// `passes` micro-batches and finishes the gradients from the end at a pace
// proportional to their count; only the last pass's backward tells (StepContext).
// The simulator's buckets and an emulated device's (bsp_step.cpp) both start by it.
double ready_fraction(size_t offset, size_t params, double backward_share, int64_t passes);

}  // namespace tandem
