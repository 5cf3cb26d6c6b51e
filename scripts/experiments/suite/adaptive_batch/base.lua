-- Study: adaptive global batch.
-- Papers: Pollux (Qiao et al., OSDI 2021) for goodput = throughput x statistical
-- efficiency, the efficiency from the gradient noise scale (McCandlish et al. 2018);
-- Cannikin (EuroSys 2024) for choosing the global batch on heterogeneous workers.
-- Reproduces: a fixed global batch is a compromise: small batches waste a step's
-- fixed costs (the all-reduce, the host's work), large ones waste samples while
-- the gradient noise is low. Choosing B from measured throughput and the measured
-- noise scale, and re-deciding as the noise scale grows, reaches a target accuracy
-- sooner than any fixed B split by lbb.
-- Expected (the issue's target): goodput reaches 87% test accuracy at least 1.2x
-- sooner than lbb at tandem's default B (64), final accuracies within half a
-- point. Measured (tools/bench/goodput_tta.py, two runs of 3 seeds each,
-- 2026-11-24): 1.30x and 1.12x sooner than lbb at 64; 0.97x and 0.86x of lbb at
-- the best fixed B (128 or 512); final accuracy after 4 epochs 0.8 points below
-- lbb at 64 (fewer, larger steps). At 85%, reached in the first epoch while the
-- measured noise scale is still ~60, B = 64 is near the best B and goodput only
-- matches lbb at 64 (1.03x).
-- Emulation: speed factors 1, 1, 0.5, 0.25 of a reference device running at an
-- eighth of a core (emulation.reference: at a quarter, 4 ranks on 2 cores overran
-- their emulated times), MLP 784-256-256-10 on Fashion-MNIST,
-- a constant learning rate (lbb: 0.05 at B = 64, scaled linearly with B; goodput:
-- 0.05 at B0 = 64, scaled by AdaScale's gain). tools/bench/goodput_tta.py searches
-- the learning rate for each variant with the same budget and repeats with seeds.
return dofile('../common.lua').training {
  global_batch = 64,
  lr = 0.05,
  schedule = { kind = 'constant' },
  stop = { epochs = 8, target_accuracy = 0.87 },
  eval_every = 32,
  workers = 4,
  emulation = { reference = 0.125, speeds = { 1, 1, 0.5, 0.25 } },
}
