-- Study: grouped synchronization against heavy stalls.
-- Paper: Basu et al., "Balancing stragglers against staleness in distributed deep
-- learning" (HiPC 2018).
-- Reproduces: when workers stall at random for a few steps (no batch size can
-- predict that), synchronous training waits for every stall; groups that are
-- synchronous inside and asynchronous across (a parameter server) let the groups
-- that are not stalled go on, at the price of stale updates, which grows with the
-- number of groups (one group is bsp, one worker a group is ASGD).
-- Expected (the paper's direction): grouped finishes its iterations faster than bsp
-- under stalls; final accuracy falls as the number of groups grows (staleness).
-- tandem's measurements so far (tools/bench/sync_modes.py) did not reproduce the
-- time-to-accuracy gain on this machine: the parameter server path costs about
-- half of bsp's throughput; this study shows where that stands.
-- Emulation: 8 workers at speed 1 (a reference device at 3% of a core), each
-- iteration each worker stalls with probability 5% (its step runs at 0.25-0.5 of
-- its speed, 2-4x as long, for one iteration; seeded).
return dofile('../common.lua').training {
  stop = { max_iterations = 450, epochs = 10 },
  eval_every = 30,
  workers = 8,
  emulation = {
    reference = 0.03,
    speeds = { 1, 1, 1, 1, 1, 1, 1, 1 },
    random = { probability = 0.05, duration = { 1, 1 }, speed = { 0.25, 0.5 }, seed = 11 },
  },
}
