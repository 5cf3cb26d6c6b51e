-- Dynamic heterogeneity by scheduled events: 4 equal workers, then worker 3 drops
-- to 0.3 of its speed from iteration 200 to 300 and recovers. With a fixed equal
-- plan every step waits for it meanwhile; the trace (trace.perfetto.json) shows
-- the idle spans of the others.
return {
  model = 'mlp',
  global_batch = 512,
  lr = 0.1,
  stop = { max_iterations = 400 },
  workers = 4,
  emulation = {
    reference = 0.5,
    events = { { worker = 3, speed = 0.3, from = 200, to = 300 } },
  },
}
