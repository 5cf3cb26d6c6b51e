-- Static heterogeneity by speed factors: 4 workers at 1, 1, 0.5 and 0.25 of a
-- reference device that itself runs at a quarter of a core (reference = 0.25), so
-- the four together need about 0.7 of this machine's 2 cores and the numbers
-- measure balancing, not CPU contention. The plan gives each worker a share of the global
-- batch proportional to its speed; try plan.kind=equal to see the stragglers wait.
return {
  model = 'mlp',
  global_batch = 512,
  lr = 0.1,
  momentum = 0.9,
  weight_decay = 5e-4,
  schedule = { kind = 'cosine' },
  stop = { epochs = 2, target_accuracy = 0.85 },
  workers = 4,
  plan = { kind = 'proportional' },
  emulation = {
    reference = 0.25,
    speeds = { 1, 1, 0.5, 0.25 },
  },
}
