-- Study: scale, simulated.
-- Papers: BOA and LBB (the min-max plan), at cluster sizes no test machine has.
-- Reproduces: the policy that balances 4 workers balances 64 to 1024 in the
-- simulator (tandem sim: the real Lua policy, timed for real, against a model of
-- the cluster: each worker's compute from this machine's calibration times its
-- speed factor, a ring all-reduce of 5 us a message and 10 GB/s a link), and its
-- cost per decision stays within a policy's budget.
-- Expected: lbb's efficiency against the ideal well above equal's at every size
-- (equal waits for the quarter-speed devices); lbb's cost per decision growing
-- about linearly with the workers and under its 50 ms budget at 1024. At 1024
-- workers the ring all-reduce's 2(N-1) latencies are a large part of a step: the
-- efficiency of both falls with N for that reason alone.
-- Emulation: N workers of four device types in equal numbers (speeds 1, 0.7, 0.5,
-- 0.25), 32 samples a worker, an explicit linear calibration (0.02 ms a sample +
-- 1 ms), noise: log-normal, sigma 0.05.
-- runs with: tandem sim
local M = {}

function M.cluster(n, policy)
  local speeds = {}
  for i = 1, n do speeds[i] = ({ 1.0, 0.7, 0.5, 0.25 })[math.floor(4 * (i - 1) / n) + 1] end
  return {
    model = 'mlp',
    global_batch = 32 * n,
    stop = { max_iterations = 300, epochs = 100000 },
    eval_every = 100000,
    workers = n,
    console = false,
    log_level = 'warn',
    policy = { file = policy, memory_mb = 1024 },
    sim = { noise = 0.05, trace_every = n >= 256 and 5 or 1 },
    emulation = {
      reference = 0.5,
      speeds = speeds,
      calibration = { batch = { 1, 64, 512 }, ms = { 1.02, 2.28, 11.24 }, host_ms = { 0.1, 0.1, 0.1 } },
    },
  }
end

return M
