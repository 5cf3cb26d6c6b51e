-- Study: measured GPU profiles, emulated and simulated.
-- Paper: LBB (J. Supercomputing 80, 2024), whose testbed mixes GPU generations.
-- Reproduces: with the relative speeds of real GPUs (tandem.devices: ResNet-50
-- training throughput of the A100 80GB and V100 32GB/16GB from NVIDIA's
-- DeepLearningExamples, FP32) a min-max plan over performance models (lbb) keeps
-- the A100s from waiting for the V100s, and the simulator predicts the same plan and
-- step time as the emulated run (tandem sim runs the same policy on a cluster model
-- calibrated on this machine).
-- Expected: lbb near 0.9 of the ideal and about 1.6x equal's throughput (two A100s
-- at ~2.6x a V100); the simulated runs within ~10% of the emulated ones in step time
-- and with the same mean plan.
-- Emulation: 4 workers, A100 80GB x 2, V100 32GB, V100 16GB (speed factors from the
-- devices library, the slowest = 1), the speed-1 device at a tenth of a core.
local devices = require 'tandem.devices'
local emulation = devices.emulation { 'a100_80gb', 'a100_80gb', 'v100_32gb', 'v100_16gb' }
emulation.reference = 0.1
return dofile('../common.lua').training {
  stop = { max_iterations = 300, epochs = 10 },
  eval_every = 50,
  workers = 4,
  emulation = emulation,
}
