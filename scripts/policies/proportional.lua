-- proportional: LB-BSP, worker-adaptive batch sizing (Chen et al., arXiv 1806.02508;
-- SoCC 2020). Each worker's local batch is proportional to its predicted speed for
-- the next iteration, speed = local_batch / compute_ms (samples per ms of compute),
-- rounded to integers by the largest-remainder rule within the workers' bounds.
--
-- Why this balances: at a fixed point b_i = B * s_i / sum s with s_i = b_i / t_i(b_i),
-- so t_i(b_i) = sum s / B for every worker: equal compute times, the min-max optimum
-- (up to the bounds). A fixed cost per iteration makes a worker's speed grow with its
-- batch, so it takes a few re-plans to get there; each is judged only after it has
-- run (`settle` observations), since the stats lag the plan by 2-3 iterations.
--
-- LB-BSP predicts speed with a NARX network from the worker's history and driving
-- factors (CPU, memory). Here: an EWMA by default, or tandem.predictor's linear NARX
-- with the batch the worker ran as its exogenous input (the engine reports no CPU
-- load; the batch is what drives a GPU's throughput, LB-BSP's GPU observation).
--
-- Parameters (cluster.params), with defaults:
--   predictor  = 'ewma'  or 'narx'
--   alpha      = 0.5     EWMA weight of the newest speed
--   narx_p = 2, narx_q = 1, narx_window = 20   NARX lags and fitting window
--   min_gain   = 0.02    re-plan only when the new plan's predicted max compute
--                        time (b_i / predicted speed_i) is this fraction below the
--                        plan in force's (no churn on noise). A threshold on samples
--                        moved (say 2% of B) would not do: a slow worker with a
--                        small batch can be 15% off the balance by a dozen samples.
--   settle     = 2       observations under a new plan before judging it
--
-- State: everything step() learns lives in one table, `state`, which save() returns
-- as it is and restore() takes back whole when it holds predictors of the same kind
-- (from another policy, or other predictors: its tracker only, so a pending plan is
-- not re-decided). Its predictors and tracker are plain data (their methods live in
-- their modules), so the copy restore() gets needs only them given their methods
-- back.
local util = require 'tandem.policy_util'
local predictor = require 'tandem.predictor'

local WHO = 'proportional'
local policy = {}
local C, cfg -- the cluster and the parameters: fixed by init()
-- state = {
--   policy = 'proportional',
--   predictor     the predictors' kind (cfg.predictor when they were made)
--   predictors    per worker: its speed predictor (tandem.predictor)
--   tracker       the plan tracker (tandem.policy_util)
--   last_seen     the newest iteration observed
-- }
local state

local function new_predictor()
  if cfg.predictor == 'narx' then
    return predictor.narx { p = cfg.narx_p, q = cfg.narx_q, window = cfg.narx_window }
  end
  return predictor.ewma { alpha = cfg.alpha }
end

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  local p = C.params
  local kind = p.predictor or 'ewma'
  if kind ~= 'ewma' and kind ~= 'narx' then
    error("proportional: params.predictor must be 'ewma' or 'narx', got " .. tostring(kind), 2)
  end
  cfg = {
    predictor = kind,
    alpha = util.param(p, 'alpha', 0.5, 0, 1, WHO),
    narx_p = util.param(p, 'narx_p', 2, 0, nil, WHO),
    narx_q = util.param(p, 'narx_q', 1, 0, nil, WHO),
    narx_window = util.param(p, 'narx_window', 20, 1, nil, WHO),
    min_gain = util.param(p, 'min_gain', 0.02, 0, 1, WHO),
    settle = util.param(p, 'settle', 2, 1, nil, WHO),
  }
  state = { policy = WHO, predictor = cfg.predictor, predictors = {}, tracker = util.tracker() }
  for i = 1, C.workers do state.predictors[i] = new_predictor() end
end

local function observe(entry)
  local workers = entry.workers
  for i = 1, C.workers do
    local w = workers[i]
    if w.local_batch > 0 and w.compute_ms > 0 then
      state.predictors[i]:observe(w.local_batch / w.compute_ms, w.local_batch)
    end
  end
end

function policy.step(stats)
  state.last_seen = util.each_new(stats, state.last_seen, observe)
  local current = util.batches(stats.workers)
  state.tracker:update(current, stats.iteration)
  if not state.tracker:settled(cfg.settle) then return nil end
  -- A worker that has never run (dropped before this policy came in) gets the mean
  -- predicted speed: a fair chance to show its own.
  local speed, sum, known = {}, 0, 0
  for i = 1, C.workers do
    speed[i] = state.predictors[i]:predict()
    if speed[i] then sum, known = sum + speed[i], known + 1 end
  end
  if known == 0 then return nil end
  local slowest, fastest = nil, nil
  for i = 1, C.workers do
    speed[i] = speed[i] or sum / known
    if not slowest or speed[i] < speed[slowest] then slowest = i end
    if not fastest or speed[i] > speed[fastest] then fastest = i end
  end
  -- Proportional to speed whatever the caps: a share above a worker's cap is computed
  -- in micro-batches (its measured speed then includes their cost).
  local plan = util.proportional_split(speed, C.global_batch, C.min_batch, C.local_max)
  local before, after = 0, 0
  for i = 1, C.workers do
    before, after = math.max(before, current[i] / speed[i]), math.max(after, plan[i] / speed[i])
  end
  if after > (1 - cfg.min_gain) * before then return nil end
  state.tracker:issue(plan, stats.iteration)
  return {
    local_batch = plan,
    micro_batches = util.micro_batches(plan, C.max_batch),
    reason = ('batches proportional to predicted speed (%s): %d samples move, predicted max compute %.1f ms '
              .. '(plan in force %.1f ms); speeds %.3g (rank %d) to %.3g (rank %d) samples/ms')
             :format(cfg.predictor, util.moved(current, plan), after, before, speed[slowest], slowest - 1,
                     speed[fastest], fastest - 1),
  }
end

function policy.save() return state end

function policy.restore(saved)
  if type(saved) ~= 'table' then return end
  if saved.policy == WHO and saved.predictor == cfg.predictor and type(saved.predictors) == 'table'
     and #saved.predictors == C.workers then
    state = saved
    for i = 1, C.workers do state.predictors[i] = predictor.load(state.predictors[i]) end
    state.tracker = util.load_tracker(state.tracker)
  elseif saved.tracker then
    state.tracker = util.load_tracker(saved.tracker)
  end
end

return policy
