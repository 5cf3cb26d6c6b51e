-- Study: static heterogeneity, on the workload users train most: a GPT.
-- Papers: BOA (J. Supercomputing 76, 2020) and LBB (J. Supercomputing 80, 2024),
-- as in static_heterogeneity, on a small GPT (models/gpt.lua) learning the fortunes
-- corpus byte by byte with AdamW and gradient clipping.
-- Reproduces: on devices of fixed, different speeds an equal split makes every step
-- wait for the slowest; lbb's min-max split over fitted performance models brings
-- the step down to what the devices can do together. The windows per step, hence
-- the mathematics (AdamW, clipping and dropout included), are the same for every
-- policy, so the time to a target validation loss follows the step time.
-- Expected: lbb reaches the target validation loss (2.6 nats per byte; a unigram
-- model scores 3.38) in about half the training time of equal or less; throughput
-- near 0.9 of the ideal (the sum of each worker's own samples/s) for lbb, ~0.35 for
-- equal.
-- Emulation: speed factors 1, 1, 0.5, 0.25 of a reference device running at a
-- quarter of a core (emulation.reference); GPT 2 layers, 4 heads, 64 wide, 32-byte
-- windows, global batch 64 windows; validation on the corpus's last 2%.
return {
  model = 'gpt',
  model_args = { n_layer = 2, n_head = 4, n_embd = 64, dropout = 0 },
  data = { name = 'text', seq_len = 32, validation = 0.02 },
  global_batch = 64,
  optimizer = 'adamw',
  lr = 3e-3,
  beta2 = 0.99,
  weight_decay = 0.1,
  clip_grad_norm = 1.0,
  schedule = { kind = 'cosine', warmup_iterations = 50, min_lr = 3e-4 },
  stop = { epochs = 1, max_iterations = 1000, target_loss = 2.6 },
  eval_every = 50,
  eval_batch = 256,
  log_every = 50,
  console = false,
  workers = 4,
  emulation = { reference = 0.25, speeds = { 1, 1, 0.5, 0.25 } },
}
