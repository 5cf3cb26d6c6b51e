#pragma once
// This machine's real compute time by local batch, measured once on an idle core.
//
// Emulated speeds stretch the real compute time: a worker at speed s on a reference
// device of r cores takes real / (r * s). Stretching the time each step really took
// would also stretch whatever slowed that step down: with 4 ranks on 2 cores, a
// step delayed 1 ms by a neighbour becomes 8 ms on a worker at 0.125 of a core, and
// the emulation measures contention instead of the cluster. So the stretch is
// applied to this calibration instead: rank 0 times forward + backward at a ladder
// of batch sizes while the other ranks wait (sleeping), and every rank uses the
// same numbers. A step that really runs longer than its emulated time is not cut
// short; the trainer counts those.
#include <cstdint>

#include "engine/train/batch_loader.hpp"
#include "engine/train/config.hpp"
#include "engine/train/step.hpp"

namespace tandem {

// Forward + backward ms at batches 1, 2, 4, ... up to max_batch (and max_batch
// itself), each the fastest of a few runs after a warm-up; and the host's part at
// each batch (loading it + an optimizer step, the latter on scratch copies so the
// model and its optimizer state stay as they were).
DeviceProfile calibrate_compute(TrainStep& step, BatchLoader& loader, int64_t max_batch, Model& model,
                                const OptimizerConfig& optimizer);

}  // namespace tandem
