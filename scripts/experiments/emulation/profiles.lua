-- Static heterogeneity by measured device profiles: each worker's compute time is a
-- table of ms by local batch (as measured on a real device, e.g. by a warm-up
-- profile), interpolated linearly. Small batches cost about the same (the device is
-- not saturated), larger ones grow linearly, as GPUs behave. A profile replaces the
-- real compute time when it is longer.
return {
  model = 'mlp',
  global_batch = 512,
  lr = 0.1,
  schedule = { kind = 'cosine' },
  stop = { epochs = 1 },
  workers = 3,
  plan = { kind = 'proportional' },
  emulation = {
    workers = {
      { profile = { batch = { 16, 64, 256, 512 }, ms = { 6, 7, 16, 30 } } },   -- a fast device
      { profile = { batch = { 16, 64, 256, 512 }, ms = { 8, 12, 36, 70 } } },  -- a mid-range one
      { profile = { batch = { 16, 64, 256, 512 }, ms = { 10, 25, 90, 180 } } }, -- an old one
    },
  },
}
