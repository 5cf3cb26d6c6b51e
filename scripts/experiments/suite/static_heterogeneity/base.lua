-- Study: static heterogeneity.
-- Papers: BOA (J. Supercomputing 76, 2020) and LBB (J. Supercomputing 80, 2024).
-- Reproduces: on a cluster of devices of fixed, different speeds, an equal split
-- makes every step wait for the slowest device; sizing each worker's batch to its
-- speed (proportional, LB-BSP's rule) or by a min-max solve over fitted
-- performance models (boa, lbb) brings the step time down to what the devices can
-- do together, and the time to a target accuracy with it (the samples per step,
-- hence the mathematics, are the same for every policy).
-- Expected: boa and lbb reach 85% test accuracy in about half the training time of
-- equal or less, proportional close to them; throughput near 0.9 of the ideal (the
-- sum of each worker's own samples/s) for the balanced runs, ~0.5 for equal.
-- Emulation: speed factors 1, 1, 0.5, 0.25 of a reference device running at a
-- quarter of a core (emulation.reference), MLP 784-256-256-10 on Fashion-MNIST.
return dofile('../common.lua').training {
  stop = { epochs = 3, target_accuracy = 0.85 },
  eval_every = 20,
  workers = 4,
  emulation = { reference = 0.25, speeds = { 1, 1, 0.5, 0.25 } },
}
