-- Across hosts: the quickstart MLP on 4 workers whose hosts differ (run it under
-- your own mpirun with a hostfile; docs/hosts.md). Nothing here names a host:
-- which rank runs where is the hostfile's and mpirun's business; the experiment
-- says only what every rank must agree on. Every host needs the same paths: this
-- file, the data set (data.dir) and the tandem binary; the run directory (--out)
-- is written by rank 0, on rank 0's host.
--
--   mpirun --allow-run-as-root -np 4 --hostfile hosts --map-by node \
--     --mca btl tcp,self --mca btl_tcp_if_include 10.0.0.0/24 --mca oob_tcp_if_include 10.0.0.0/24 \
--     -x OPENBLAS_NUM_THREADS=1 tandem run scripts/experiments/multihost.lua --out runs/multihost
--
-- lbb balances the local batches on the workers' measured compute times: a slower
-- host gets fewer samples. A slow link slows every worker's all-reduce alike (each
-- waits for the slowest link), so it shows in every worker's comm_ms rather than
-- in the plan.
return {
  model = 'mlp',
  model_args = { hidden = { 256, 256 } },
  data = { name = 'fashion-mnist' },
  workers = 4,
  global_batch = 256,
  optimizer = 'sgd',
  lr = 0.1,
  momentum = 0.9,
  weight_decay = 5e-4,
  schedule = { kind = 'cosine' },
  stop = { epochs = 2, target_accuracy = 0.85 },
  eval_every = 100,
  policy = { file = 'lbb' },
  -- Across a network a collective may take longer than on one host; a rank that
  -- dies or stops is still named within this many seconds.
  collective_timeout_s = 60,
  -- The console's socket lives in the run directory, on rank 0's host: attach there.
  console = true,
}
