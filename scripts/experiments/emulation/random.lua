-- Dynamic heterogeneity by random events: every worker, every iteration, starts a
-- slowdown with probability 2%, lasting 5 to 20 iterations at 0.2 to 0.5 of its
-- speed. Seeded: the same seed gives the same stragglers at the same iterations.
return {
  model = 'mlp',
  global_batch = 512,
  lr = 0.1,
  stop = { max_iterations = 400 },
  workers = 4,
  emulation = {
    reference = 0.5,
    random = { probability = 0.02, duration = { 5, 20 }, speed = { 0.2, 0.5 }, seed = 3 },
  },
}
