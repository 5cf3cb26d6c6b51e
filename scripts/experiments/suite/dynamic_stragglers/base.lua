-- Study: dynamic stragglers.
-- Papers: LBB (J. Supercomputing 80, 2024: rapid-tune and fine-tune after a speed
-- change) and LB-BSP (Chen et al., SoCC 2020: batch sizes follow predicted speeds).
-- Reproduces: when a worker slows down for a while (a co-located job, thermal
-- throttling) and recovers, a policy that re-balances brings the step time back to
-- what the changed cluster can do within a few iterations of each change, where
-- the equal split waits for the slowed worker the whole time.
-- Expected: lbb and proportional recover within ~5-10 iterations of each change
-- (decisions apply 2 iterations after the stats they come from, and lbb confirms a
-- change over 2 observations); equal never recovers until the event ends. Under
-- random slowdowns the policies gain less (short events end before a re-plan pays).
-- Emulation: 4 workers at 1, 1, 0.5, 0.25 of a reference device at an eighth of a
-- core; scheduled: worker 0 at 0.3 of its speed from iteration 150 to 300;
-- random (random_*.lua): each worker, each iteration, starts a slowdown to 0.2-0.5
-- with probability 1%, lasting 10 to 40 iterations (seeded).
return dofile('../common.lua').training {
  stop = { max_iterations = 450, epochs = 10 },
  eval_every = 50,
  workers = 4,
  emulation = {
    reference = 0.125,
    speeds = { 1, 1, 0.5, 0.25 },
    events = { { worker = 0, speed = 0.3, from = 150, to = 300 } },
  },
}
