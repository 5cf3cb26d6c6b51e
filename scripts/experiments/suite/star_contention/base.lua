-- Study: homogeneous workers with contention stragglers.
-- Paper: STAR, straggler-tolerant and resilient training on homogeneous GPUs
-- (stragglers from CPU and network-bandwidth contention, not from slower devices).
-- Reproduces: identical workers still straggle: a worker whose host is busy computes
-- slowly for a few steps, a worker behind a congested link makes every all-reduce
-- slower. Batch balancing cannot help with stalls this short; STAR chooses a
-- synchronisation mode from predicted iteration times and a statistical-efficiency
-- estimate (bsp, k-sync, grouped), switching only when the straggler picture
-- changes, and does not fall back to ASGD.
-- Expected (the paper's direction): star at least as fast to the target as the
-- best fixed mode, bsp slowed by every contention event, asgd not reliably better
-- than bsp.
-- Emulation: 8 workers at speed 1 (a reference device at 3% of a core); CPU
-- contention: each iteration each worker starts a slowdown to 0.3-0.6 of its speed
-- with probability 3%, lasting 2 to 6 iterations (seeded); bandwidth contention:
-- worker 7's every collective takes 2 ms longer.
return dofile('../common.lua').training {
  stop = { max_iterations = 450, epochs = 10 },
  eval_every = 30,
  workers = 8,
  emulation = {
    reference = 0.03,
    speeds = { 1, 1, 1, 1, 1, 1, 1, 1 },
    comm_delay_ms = { 0, 0, 0, 0, 0, 0, 0, 2 },
    random = { probability = 0.03, duration = { 2, 6 }, speed = { 0.3, 0.6 }, seed = 13 },
  },
}
