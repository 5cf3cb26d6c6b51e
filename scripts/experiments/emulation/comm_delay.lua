-- A slow link: worker 2's every collective takes 5 ms longer (as over a congested
-- or distant network), which every worker feels in the all-reduce.
return {
  model = 'mlp',
  global_batch = 512,
  lr = 0.1,
  stop = { max_iterations = 300 },
  workers = 4,
  emulation = {
    reference = 0.5,
    comm_delay_ms = { 0, 0, 5, 0 },
  },
}
