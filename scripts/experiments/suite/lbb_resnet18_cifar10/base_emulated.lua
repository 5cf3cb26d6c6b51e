-- The LBB workload emulated on CPU workers (see base.lua): the four GPUs as speed
-- factors (392.9 / t), the slowest at a tenth of a core, global batch 32, 12 steps.
local e = dofile('base.lua')
e.global_batch = 32
e.stop = { max_iterations = 12 }
e.log_every = 4
e.data.test_size = 200  -- the run ends with an evaluation: 200 images, not 10,000
e.emulation = { speeds = { 392.9 / 81.8, 392.9 / 81.5, 392.9 / 85.4, 1 }, reference = 0.1 }
return e
