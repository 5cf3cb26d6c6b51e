-- goodput: chooses the global batch B as well as its split. Pollux (Qiao et al.,
-- "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep Learning",
-- OSDI 2021; AdaptDL is its implementation) picks the batch that maximises
--   goodput(B) = throughput(B) x statistical efficiency(B),
-- the samples per second times what each sample is worth at that batch: a larger
-- batch computes faster per sample (fixed costs are shared) but each sample moves
-- training less once B passes the gradient noise scale. Cannikin ("Optimal
-- Adaptive Distributed DNN Training over Heterogeneous Clusters") carries this to
-- workers of different speeds: the throughput of a B is that of its best split,
-- each worker's local batch set by its own speed.
--
-- Per observation:
--   - the predicted iteration time of a split b, T = max_i t_i(b_i) + S, from each
--     worker's time to its gradient t_i(b) = m_i(b) + d_i and the time after it.
--     m_i is the worker's compute time model (tandem.perf_model: linear by least
--     squares over a sliding window, or the piecewise model of a warm-up
--     profile). While the plan
--     does not change a worker is seen at one batch size only, and least squares
--     cannot tell slope from intercept: the linear model then keeps time
--     proportional to the batch, m_i(b) = c_i b with c_i the measured compute_ms
--     per sample (as star does; later fits at one batch keep the slope they had),
--     and learns the intercept once its window holds distinct batch sizes (after a
--     change of B). d_i is an EWMA of the worker's data_ms (taken as not growing
--     with b, as star does). S is an EWMA of the workers' mean comm_ms +
--     optimizer_ms: the all-reduce (its size is the model's, not the batch's;
--     waiting for others is idle_ms, left out) and the update, which every worker
--     does after the slowest has arrived, so S is the cluster's and stays out of
--     the split (a per-worker one would have the split chase the noise of each
--     worker's all-reduce time). A model that mispredicts at an unchanged batch
--     for `confirm` observations in a row (a worker whose speed changed) is refit
--     from them, as boa does;
--   - the gradient noise scale B_noise (tandem.noise_scale: McCandlish et al.'s
--     two-batch-size estimator from the workers' grad_sq and global_grad_sq, each
--     observation at its own B; averaged by weighted, bias-corrected EWMAs in
--     which an estimate of |G|^2 weighs B^2, since far below B_noise its spread
--     falls as 1 / B);
--   - the statistical efficiency of a global batch B relative to the experiment's
--     B0, Pollux's E(B) = (B_noise + B0) / (B_noise + B): 1 at B0, below 1 above it
--     (a sample at B is worth E(B) of one at B0), above 1 below it;
--   - for each candidate B, its exact integer min-max split within
--     min_batch/max_batch (tandem.minmax, over the t_i), its predicted iteration
--     time T(B), throughput B / T(B) and goodput B / T(B) * E(B). The
--     candidates: the B in force, and once B may move, a geometric grid of
--     `candidates` points over the batches within a factor max_step of it and
--     within [global_batch_min, global_batch_max], and B0 when among those.
--
-- Decisions, on stats taken under the plan in force once it has run `confirm`
-- times, after `warmup` observations, against the predicted goodput of the plan in
-- force (by the same models, so their errors largely cancel):
--   - the best candidate, when it is another B and predicts more than min_gain more
--     goodput than the plan in force and than the best split of the B in force
--     (so that a re-split's gain is not taken for the new B's). B moves only
--     after `warmup` noise-scale estimates at the B in force (B0 included); as
--     training goes on B_noise usually grows and B follows it up. One decision
--     moves B by at most a factor max_step: far below B_noise the estimator is at
--     its least reliable (|G|^2 is a small difference of two large numbers, often
--     negative, which reads as "noise dominates": the top of the clamp), and the
--     time models extrapolate from the batches they have seen; so a far jump is
--     taken in steps, each judged again with estimates and times at the new B,
--     which are better. A move back the way
--     the last one came needs twice min_gain: the times drift with the load of
--     the machine, and a B is judged by what was measured while it ran, so two
--     B's can each look better from the other within a small gain;
--   - else the min-max split of the B in force, when it predicts more than
--     split_gain more (a worker's speed changed: lbb's re-solve). split_gain is
--     larger than min_gain: a re-split moves a few samples per worker, and models
--     fitted over batches a few samples apart mispredict by several percent when
--     times are noisy, so a small predicted gain would re-split on noise;
--   - else nothing. min_gain is the hysteresis: B_noise and the times are noisy, and
--     near the optimum the goodput curve is flat, so small predicted gains are noise.
-- With global_batch_min == global_batch_max (or without them) B stays B0 and the
-- policy only re-splits. Plans are bsp plans (no mode): a changed B changes the
-- mathematics of a step, which only the synchronous update keeps well defined.
-- The learning rate follows B in the engine (cluster.lr_scaling: linear, sqrt or
-- adascale; the policy does not need it); Pollux derives E(B) for AdaScale, for
-- the other two it is the same model's estimate.
--
-- Every plan carries `metrics` for the trace: b_noise, noise_estimates,
-- global_batch and global_batch_before, efficiency(_before), iteration_ms(_before)
-- (predicted), throughput(_before) (samples/s, predicted), goodput(_before), gain
-- (relative, predicted), candidates (how many B were weighed), sync_ms (S).
--
-- Parameters (cluster.params), with defaults:
--   min_gain = 0.05       relative predicted goodput gain that justifies a new B
--   split_gain = 0.1      relative predicted gain that justifies a new split of the same B
--   warmup = 5            observations (and noise-scale estimates, for a new B)
--                         before the first decision
--   confirm = 2           observations under the plan in force before judging it;
--                         also mispredictions in a row that refit a model
--   candidates = 12       points of the geometric grid of B (2..16; beyond 256
--                         workers at most 4096 / workers, for the time budget)
--   max_step = 2          the most one decision multiplies or divides B by
--   model_change = 0.1    relative misprediction at an unchanged batch that counts
--   alpha = 0.5           EWMA weight of the newest data_ms and of comm_ms + optimizer_ms
--   noise_alpha = 0.02    weight of the newest |G|^2 and tr(Sigma) estimates in their
--                         weighted, bias-corrected EWMAs (about the last 50 count: one
--                         estimate from a few workers is noisy, and B should follow
--                         the trend, not the noise; AdaptDL averages longer still)
--   b_noise = B0          B_noise until the first estimate (E(B) in the metrics)
--   window = 20           observations per linear model
--   profile               warm-up profile: per worker or per device name (as boa, lbb)
--   allow_drop = false    let the solve give a worker 0 samples (when min_batch is 0)
--   solver                tandem.minmax method (default: 'lp' up to 64 workers, else
--                         'bisect': one solve per candidate must fit the budget)
--
-- State: everything step() learns lives in one table, `state`, which save() returns
-- as it is and restore() takes back whole (from boa or lbb: their tracker and
-- models; from star: its noise-scale estimator). Its models, predictors, estimator
-- and tracker are plain data with their methods in their modules; restore() gives
-- the copy it gets their methods back.
local util = require 'tandem.policy_util'
local minmax = require 'tandem.minmax'
local predictor = require 'tandem.predictor'
local noise_scale = require 'tandem.noise_scale'

local WHO = 'goodput'
local DAY_MS = 86400000 -- a time beyond a day per iteration is junk, not a measurement

local policy = {}
-- Fixed by init(): the cluster (with B0 = global_batch and the range of B as
-- batch_min, batch_max), the parameters, the solve's minima raised to one sample
-- (used where B allows them), and the minmax method.
local C, cfg, raised, method
-- state = {
--   policy = 'goodput',
--   models                        per worker: its compute time model (tandem.perf_model)
--   data                          per worker: EWMA of data_ms (tandem.predictor)
--   sync                          EWMA of the workers' mean comm_ms + optimizer_ms (tandem.predictor)
--   noise                         the B_noise estimator (tandem.noise_scale)
--   tracker                       the plan tracker (tandem.policy_util)
--   stale, stale_ms, prev_batch   per worker: mispredictions at an unchanged batch (policy_util.observe_model)
--   last_seen                     the newest iteration observed
--   observed                      step() calls so far
--   batch, estimates_at_batch     the B in force and the noise-scale estimates taken under it
--   direction                     the last move of B: 1 up, -1 down (nil: none yet)
-- }
local state

local floor, huge, max, min = math.floor, math.huge, math.max, math.min

local function is_int(v) return type(v) == 'number' and v == floor(v) and v > -huge and v < huge end
local function finite(v) return type(v) == 'number' and v == v and v > -huge and v < huge end

-- The range of B: cluster.global_batch_min/max (B0 when absent), narrowed to what
-- the workers' bounds can hold.
local function batch_range(cluster, c)
  local B0, sum_lo, sum_hi = c.global_batch, 0, 0
  for i = 1, c.workers do sum_lo, sum_hi = sum_lo + c.min_batch[i], sum_hi + c.max_batch[i] end
  local bounds = {}
  for _, key in ipairs { 'global_batch_min', 'global_batch_max' } do
    local v = cluster[key]
    if v == nil then v = B0 end
    if not is_int(v) or v < 1 then
      error(('%s: cluster.%s must be a positive integer, got %s'):format(WHO, key, tostring(v)), 3)
    end
    bounds[#bounds + 1] = v
  end
  local lo_b, hi_b = bounds[1], bounds[2]
  if lo_b > hi_b then
    error(('%s: cluster.global_batch_min %d is above global_batch_max %d'):format(WHO, lo_b, hi_b), 3)
  end
  lo_b, hi_b = max(lo_b, sum_lo), min(hi_b, sum_hi)
  if lo_b > hi_b then
    error(('%s: no global batch in [%d, %d] fits the workers\' bounds (min_batch sum to %d, max_batch to %d)')
          :format(WHO, bounds[1], bounds[2], sum_lo, sum_hi), 3)
  end
  return lo_b, hi_b
end

local function int_param(p, key, default, lo_v, hi_v) return util.int_param(p, key, default, lo_v, hi_v, WHO) end

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  C.batch_min, C.batch_max = batch_range(cluster, C)
  local p = C.params
  cfg = {
    min_gain = util.param(p, 'min_gain', 0.05, 0, nil, WHO),
    warmup = int_param(p, 'warmup', 5, 1),
    confirm = int_param(p, 'confirm', 2, 1),
    candidates = int_param(p, 'candidates', 12, 2, 16),
    max_step = util.param(p, 'max_step', 2, 1, nil, WHO),
    split_gain = util.param(p, 'split_gain', 0.1, 0, nil, WHO),
    model_change = util.param(p, 'model_change', 0.1, 0, nil, WHO),
    alpha = util.param(p, 'alpha', 0.5, 0.01, 1, WHO),
    noise_alpha = util.param(p, 'noise_alpha', 0.02, 0.001, 1, WHO),
    b_noise = util.param(p, 'b_noise', C.global_batch, 0, nil, WHO),
    window = int_param(p, 'window', 20, 1),
    solver = util.solver(p, WHO),
  }
  method = cfg.solver or (C.workers <= 64 and 'lp' or 'bisect')
  -- The minima raised to one sample, as they are for the largest B (a smaller B
  -- that cannot give everyone a sample falls back to min_batch, see minima()).
  raised = util.solve_minima({ workers = C.workers, global_batch = C.batch_max, min_batch = C.min_batch,
                               max_batch = C.max_batch, params = p }, WHO)
  state = { policy = WHO, models = util.time_models(C, cfg.window, WHO), data = {}, tracker = util.tracker(),
            sync = predictor.ewma { alpha = cfg.alpha },
            noise = noise_scale.new { alpha = cfg.noise_alpha, weighted = true }, stale = {}, stale_ms = {},
            prev_batch = {}, observed = 0, batch = C.global_batch, estimates_at_batch = 0 }
  for i = 1, C.workers do
    state.data[i] = predictor.ewma { alpha = cfg.alpha }
    state.stale[i], state.stale_ms[i], state.prev_batch[i] = 0, 0, 0
  end
end

---------------------------------------------------------------------------------
-- Observations.

-- A time in a worker's stats, 0 when absent; nil when it is junk.
local function time_ms(w, key)
  local v = w[key] or 0
  if not finite(v) or v < 0 or v >= DAY_MS then return nil end
  return v
end

local function observe(entry)
  local workers = entry.workers
  local sync_sum, synced = 0, 0
  for i = 1, C.workers do
    local w = workers[i]
    local b, ms = w and w.local_batch, w and w.compute_ms
    -- What a worker cannot have run (beyond its cap, a time past a day) is no
    -- measurement: the model's window would keep it long after the history has
    -- dropped it.
    if is_int(b) and b > 0 and b <= C.max_batch[i] and finite(ms) and ms > 0 and ms < DAY_MS then
      util.observe_model(state.models[i], state, i, b, ms, cfg.model_change)
      local data, comm, update = time_ms(w, 'data_ms'), time_ms(w, 'comm_ms'), time_ms(w, 'optimizer_ms')
      if data then state.data[i]:observe(data) end
      if comm and update then sync_sum, synced = sync_sum + comm + update, synced + 1 end
    end
  end
  if synced > 0 then state.sync:observe(sync_sum / synced) end
end

-- Refits the models that mispredicted `confirm` times in a row at an unchanged
-- batch (prev_batch, the one they were taken at), from their mean (as boa does).
local function refit_stale()
  for i = 1, C.workers do
    if state.stale[i] >= cfg.confirm then
      state.models[i]:refit_latest(state.prev_batch[i], state.stale_ms[i] / state.stale[i])
      state.stale[i], state.stale_ms[i] = 0, 0
    end
  end
end

---------------------------------------------------------------------------------
-- A worker's time to its gradient t_i(b) = m_i(b) + d_i, in the form tandem.minmax
-- takes (d_i as o).

local Timed = {}
Timed.__index = Timed

function Timed:predict(b)
  if b <= 0 then return 0 end -- no samples, no compute (as perf_model's t(0) = 0)
  return self.m:predict(b) + self.o
end

function Timed:inverse(T) return self.m:inverse(T - self.o) end

function Timed:pieces()
  local out = {}
  for k, p in ipairs(self.m:pieces()) do out[k] = { a = p.a, c = p.c + self.o } end
  return out
end

-- The time models of this decision; nil when a worker has never run.
local function timed_models()
  local models = {}
  for i = 1, C.workers do
    if not state.models[i]:ready() then return nil end
    models[i] = setmetatable({ m = state.models[i], o = state.data[i]:predict() or 0 }, Timed)
  end
  return models
end

---------------------------------------------------------------------------------
-- Goodput of a global batch.

local function efficiency(B, bn) return (bn + C.global_batch) / (bn + B) end

-- The solve's minima for B: one sample each where B allows it, else min_batch.
local function minima(B)
  local sum = 0
  for i = 1, C.workers do sum = sum + raised[i] end
  return sum <= B and raised or C.min_batch
end

-- B's rate when its slowest worker takes T_max ms to its gradient.
local function rate(B, T_max, bn)
  local T = T_max + (state.sync:predict() or 0)
  local throughput = T > 0 and 1000 * B / T or 0
  local eff = efficiency(B, bn)
  return { B = B, T = T, throughput = throughput, eff = eff, goodput = throughput * eff }
end

-- The min-max split of B and its goodput; nil when B cannot be split.
local function evaluate(models, B, bn)
  local b, T = minmax.solve(models, B, minima(B), C.max_batch, { method = method })
  if not b then return nil end
  local r = rate(B, T, bn)
  r.batches = b
  return r
end

-- Points of the grid: `candidates`, fewer beyond 256 workers so that one decision
-- (a min-max solve per candidate, O(N) each: ~4 ms at 1024 workers, interpreted)
-- fits the default 50 ms budget: at most WORK / N, at least 2.
local WORK = 4096
local function grid_points() return max(2, min(cfg.candidates, floor(WORK / C.workers))) end

-- The candidate global batches, ascending: the B in force (when within the
-- range), and when B may move a geometric grid over the batches within max_step
-- of it, and B0 when it is among them. A B in force outside the range (a plan from
-- elsewhere) gets the grid over the whole range.
local function candidate_batches(B_now, may_move)
  local list, seen = {}, {}
  local lo_b, hi_b = C.batch_min, C.batch_max
  local function add(B)
    if B >= lo_b and B <= hi_b and not seen[B] then seen[B], list[#list + 1] = true, B end
  end
  add(B_now)
  local inside = #list == 1
  if may_move or not inside then
    if inside then
      lo_b, hi_b = max(lo_b, math.ceil(B_now / cfg.max_step)), min(hi_b, floor(B_now * cfg.max_step))
    end
    local K = grid_points()
    for k = 0, K - 1 do add(floor(lo_b * (hi_b / lo_b) ^ (k / (K - 1)) + 0.5)) end
    add(C.global_batch)
  end
  table.sort(list)
  return list
end

-- The plan in force: its B and its rate by the same models.
local function in_force(models, current, bn)
  local B, T = 0, 0
  for i = 1, C.workers do
    if current[i] > 0 then B, T = B + current[i], max(T, models[i]:predict(current[i])) end
  end
  return rate(B, T, bn)
end

local function finite_only(metrics)
  local out = {}
  for k, v in pairs(metrics) do
    if finite(v) then out[k] = v end
  end
  return out
end

local function plan_of(pick, now, bn, count, why)
  local gain = now.goodput > 0 and pick.goodput / now.goodput - 1 or 0
  local batches = {}
  for i = 1, C.workers do batches[i] = pick.batches[i] end
  return {
    local_batch = batches,
    reason = why(gain),
    metrics = finite_only {
      b_noise = bn, noise_estimates = state.noise.estimates, global_batch = pick.B, global_batch_before = now.B,
      efficiency = pick.eff, efficiency_before = now.eff, iteration_ms = pick.T, iteration_ms_before = now.T,
      throughput = pick.throughput, throughput_before = now.throughput, goodput = pick.goodput,
      goodput_before = now.goodput, gain = gain, candidates = count, sync_ms = state.sync:predict() or 0,
    },
  }
end

-- The plan to return for stats under `current` (nil: keep it).
local function decide(models, current)
  local bn = state.noise:b_noise(C.global_batch, cfg.b_noise)
  local now = in_force(models, current, bn)
  local may_move = C.batch_min < C.batch_max and state.estimates_at_batch >= cfg.warmup
  local outside = now.B < C.batch_min or now.B > C.batch_max
  local list = candidate_batches(now.B, may_move)
  local best, same
  for _, B in ipairs(list) do
    local r = evaluate(models, B, bn)
    if r then
      if not best or r.goodput > best.goodput then best = r end
      if B == now.B then same = r end
    end
  end
  if not best then return nil end
  -- Back the way the last move came, twice the gain: the times drift with the
  -- machine's load, and each B is judged by what was measured while it ran.
  local back = state.direction ~= nil and (best.B - now.B) * state.direction < 0
  local bar_move = (1 + (back and 2 or 1) * cfg.min_gain) * max(now.goodput, same and same.goodput or 0)
  if best.B ~= now.B and (outside or best.goodput > bar_move) then
    state.direction = best.B > now.B and 1 or -1
    return plan_of(best, now, bn, #list, function(gain)
      return ('B %d -> %d: goodput %+.0f%% (B_noise %.0f, eff %.2f -> %.2f, %.0f -> %.0f samples/s)')
             :format(now.B, best.B, 100 * gain, bn, now.eff, best.eff, now.throughput, best.throughput)
    end)
  end
  if same and same.goodput > (1 + cfg.split_gain) * now.goodput and not util.same(same.batches, current) then
    return plan_of(same, now, bn, #list, function()
      return ('re-split at B %d: predicted iteration %.1f -> %.1f ms'):format(now.B, now.T, same.T)
    end)
  end
  return nil
end

-- Counts the noise-scale estimates taken at the B in force (since it last changed).
local function observe_noise(stats, current)
  local B = 0
  for i = 1, C.workers do
    if current[i] > 0 then B = B + current[i] end
  end
  if B ~= state.batch then state.batch, state.estimates_at_batch = B, 0 end
  if state.noise:observe(stats) then state.estimates_at_batch = state.estimates_at_batch + 1 end
end

function policy.step(stats)
  state.last_seen = util.each_new(stats, state.last_seen, observe)
  state.observed = state.observed + 1
  local current = util.batches(stats.workers)
  for i = 1, C.workers do
    if not is_int(current[i]) then return nil end -- not a plan this policy can reason about
  end
  observe_noise(stats, current)
  state.tracker:update(current, stats.iteration)
  refit_stale()
  if state.observed < cfg.warmup or not state.tracker:settled(cfg.confirm) then return nil end
  local models = timed_models()
  if not models then return nil end
  local plan = decide(models, current)
  if plan then state.tracker:issue(plan.local_batch, stats.iteration) end
  return plan
end

function policy.save() return state end

function policy.restore(saved)
  local whole
  state, whole = util.restore_models(state, saved, WHO, C.workers)
  if whole then
    for i = 1, C.workers do state.data[i] = predictor.load(state.data[i]) end
    state.sync = predictor.load(state.sync)
    state.noise = noise_scale.load(state.noise, cfg.noise_alpha)
  elseif type(saved) == 'table' and saved.policy == 'star' and type(saved.noise) == 'table' then
    -- star's smoothed values, as if one estimate at B0 of goodput's averages.
    local star = noise_scale.load(saved.noise)
    if star.g2 then
      local w = C.global_batch * C.global_batch
      state.noise.g2, state.noise.trace, state.noise.estimates = star.g2, star.trace, star.estimates
      state.noise.sums = { g2 = w * star.g2, g2_weight = w, trace = star.trace, trace_weight = 1 }
    end
  end
end

return policy
