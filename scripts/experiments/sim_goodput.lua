-- The goodput policy at 64 to 1024 simulated workers (issue 23; runs with: tandem sim).
-- Pollux (Qiao et al. 2021) picks the global batch B that maximises goodput =
-- throughput x statistical efficiency, E(B) = (B_noise + B0) / (B_noise + B), as
-- the gradient noise scale B_noise grows during training (McCandlish et al. 2018).
-- The simulator has no gradients: sim.noise_scale models them (each worker's
-- grad_sq |G|^2 + B_noise / b, the cluster's global_grad_sq at B, B_noise growing
-- with the epochs by sim.noise_growth; engine/sim/gradient_model.hpp), so the
-- policy's estimate of B_noise, and the B it picks, behave as in training. The
-- summary's goodput (samples/s at B0's worth) compares it with a fixed B:
--
--   tandem sim scripts/experiments/sim_goodput.lua                  # 64 workers
--   tandem sim scripts/experiments/sim_goodput.lua policy.file=lbb  # B fixed at B0
--   tools/sim/sweep.py build scripts/experiments/sim_goodput.lua --set workers=64,256,1024 \
--       --set mix=four_types --set policy.file=lbb,goodput --out goodput.csv
--
-- (sweep.py's mix gives emulation.speeds for any number of workers.) Expected, not
-- yet measured: early on, with B_noise (4096) well below B0, a sample at a smaller B
-- makes more progress (E(8192) = 3), and goodput picks B near policy.global_batch.min;
-- as B_noise grows (45056 by the fifth epoch) larger batches lose little, and B
-- grows. At 64 workers a step is mostly compute and B changes throughput little; at
-- 1024 the ring all-reduce's 2(N-1) latencies dominate a step of 32 samples a
-- worker, a larger B amortises them, and goodput's lead over lbb at B0 should grow
-- with N.
-- Emulation: four device types in equal numbers (speeds 1, 0.7, 0.5, 0.25), an
-- explicit linear calibration (0.02 ms a sample + 1 ms), log-normal noise of 0.05 on
-- compute times and gradient norms; a synthetic data set of ImageNet's size, so that
-- B0 = 32768 (32 samples a worker at 1024) is 39 iterations an epoch.
local n = 64
local speeds = {}
for i = 1, n do speeds[i] = ({ 1.0, 0.7, 0.5, 0.25 })[math.floor(4 * (i - 1) / n) + 1] end
return {
  model = 'mlp',
  data = { name = 'synthetic', train_size = 1281167, test_size = 10000 },
  global_batch = 32768,
  lr_scaling = 'adascale',
  stop = { epochs = 5 },
  eval_every = 100000,
  workers = n,
  console = false,
  log_level = 'warn',
  policy = { file = 'goodput', global_batch = { min = 8192, max = 262144 } },
  sim = { noise = 0.05, noise_scale = 4096, noise_growth = 2 },
  emulation = {
    reference = 0.5,
    speeds = speeds,
    calibration = { batch = { 1, 64, 512 }, ms = { 1.02, 2.28, 11.24 }, host_ms = { 0.1, 0.1, 0.1 } },
  },
}
