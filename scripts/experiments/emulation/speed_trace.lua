-- Replay of a per-worker speed trace (speed_trace.txt next to this file): one line
-- per iteration, one speed multiplier per worker, e.g. recorded from a real cluster.
-- After the last line the last speeds hold.
return {
  model = 'mlp',
  global_batch = 512,
  lr = 0.1,
  stop = { max_iterations = 300 },
  workers = 4,
  emulation = {
    reference = 0.5,
    speed_trace = 'speed_trace.txt',
  },
}
