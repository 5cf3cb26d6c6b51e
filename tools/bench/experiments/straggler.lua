-- The straggler scenario of tools/bench/hetero_policies.py: the 4-worker emulated
-- cluster (speeds 1, 1, 0.5, 0.25 of the reference device) where worker 0 drops to
-- 0.3 of its speed for 200 iterations, then recovers. The policy comes from the
-- command line (policy.file=lbb).
return {
  model = 'mlp',
  model_args = { hidden = { 256, 256 } },
  global_batch = 512,
  lr = 0.2,
  weight_decay = 5e-4,
  schedule = { kind = 'cosine' },
  stop = { max_iterations = 450, epochs = 10 },
  eval_every = 100000,
  workers = 4,
  emulation = {
    reference = 0.125,
    speeds = { 1, 1, 0.5, 0.25 },
    events = { { worker = 0, speed = 0.3, from = 150, to = 350 } },
  },
}
