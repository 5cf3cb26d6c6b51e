-- lbb: LBB, load-balanced batching (J. Supercomputing 80, 2024). Performance models
-- and a min-max solve set the batches; then the straggler extent
-- SE = (max - min) / mean of the compute times, every iteration, decides:
--   SE < ft             nothing;
--   ft <= SE < rt       fine-tune: move a few samples from the slowest worker to the
--                       fastest;
--   SE >= rt            rapid-tune: refit every model from its latest observation
--                       (here: the mean of the last `confirm`, see below) and
--                       re-solve; then `settle` iterations of fine-tuning only.
--
-- Choices where the paper leaves room or tandem differs:
--   - models: LBB fits a cubic in a warm-up profile and a linear model during
--     training. Here: tandem.perf_model.linear over a sliding window, or the
--     piecewise (flat, then linear) model of params.profile when one is given.
--     Without a profile the first solve uses the first observations (one batch per
--     worker: time taken as proportional to the batch) and the models learn their
--     intercepts from the plans that follow.
--   - rapid-tune drops each model's window (it mixes observations from before and
--     after the speed change) and keeps its shape scaled through the latest
--     observation (perf_model's refit_latest), which is what LBB does.
--   - the solve is exact in integers (tandem.minmax) instead of LBB's rounded
--     relaxation, which can miss sum b = B; the objective is max_i T_i (LBB's
--     max - min is minimized by the same equal times; min-max is what the step time
--     pays for).
--   - fine-tune moves `move` samples, or, by default, the number the two workers'
--     models say equalizes them, (t_slow - t_fast) / (slope_slow + slope_fast)
--     rounded to whichever neighbouring integer predicts the lower max, at most a
--     quarter of the slowest worker's batch (a fine-tune, not a re-plan); nothing
--     when no move would lower the pair's max (a slow worker's one sample can
--     outweigh the gap; moving it would only swap the roles, back and forth).
--   - plans apply 2-3 iterations after the stats they come from; lbb acts only on
--     stats taken under the plan in force, once it has run `confirm` times, and the
--     settle window counts iterations under the rapid-tune plan.
--   - one iteration's times are noisy (a time slice lost to another process is a
--     straggler for one step): lbb tunes only when each of the last `confirm`
--     observations shows it (every SE >= ft; every SE >= rt for a rapid-tune), and
--     tunes from each worker's mean time over them. With confirm = 2 a sudden
--     slowdown costs one iteration more before the rapid-tune, a one-step spike
--     costs nothing; confirm = 1 is the paper's rule.
--   - no worker is dropped (b = 0) unless params.allow_drop: a dropped worker is
--     never measured again, and a model whose intercept is noise would drop it for
--     a saving that does not exist.
--
-- Parameters (cluster.params), with defaults:
--   ft = 0.05, rt = 0.3   SE thresholds
--   settle = 3            iterations of fine-tuning only after a rapid-tune
--   move                  samples per fine-tune (default: from the models, above)
--   confirm = 2           observations under the plan in force that must all show
--                         an imbalance before tuning
--   allow_drop = false    let the solve give a worker 0 samples (when min_batch is 0)
--   window = 20           observations per linear model
--   profile               warm-up profile: per worker ({ [1] = {{b, ms}, ...} }) or
--                         per device name ({ ['GTX 1070'] = {{b, ms}, ...} })
--   solver                tandem.minmax method (default: its own choice)
--   micro_batches = true  a worker's cap (cluster.max_batch: its memory) bounds its
--                         micro-batch: the solve gives it more, in micro-batches
--                         that each pay a pass's fixed cost; false: the cap bounds
--                         its local batch (the plans before issue 37)
--
-- State: everything step() learns lives in one table, `state`, which save() returns
-- as it is and restore() takes back whole (from another policy: its tracker, and
-- its models when it saved one per worker, as boa does). Its models and tracker are
-- plain data (their methods live in their modules), so the copy restore() gets
-- needs only them given their methods back.
local util = require 'tandem.policy_util'
local minmax = require 'tandem.minmax'
local stragglers = require 'tandem.stragglers'

local WHO = 'lbb'
local policy = {}
local C, cfg, lo -- the cluster, the parameters, the solve's minima: fixed by init()
-- state = {
--   policy = 'lbb',
--   models         per worker: its time model (tandem.perf_model)
--   tracker        the plan tracker (tandem.policy_util)
--   last_seen      the newest iteration observed
--   solved         whether the initial solve has been made
--   settle_until   last iteration of the fine-tune-only window (nil: none)
--   rapid_plan     the rapid-tune plan whose settle window starts when it applies
-- }
local state

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  local p = C.params
  cfg = {
    ft = util.param(p, 'ft', 0.05, 0, nil, WHO),
    rt = util.param(p, 'rt', 0.3, 0, nil, WHO),
    settle = util.param(p, 'settle', 3, 0, nil, WHO),
    move = util.param(p, 'move', nil, 1, nil, WHO),
    confirm = util.param(p, 'confirm', 2, 1, nil, WHO),
    window = util.param(p, 'window', 20, 1, nil, WHO),
    solver = util.solver(p, WHO),
  }
  if cfg.rt < cfg.ft then
    error(('lbb: params.rt (%g) must not be below params.ft (%g)'):format(cfg.rt, cfg.ft), 2)
  end
  lo = util.solve_minima(C, WHO)
  cfg.step_models, cfg.hi, cfg.micro = util.cap_rule(C, WHO)
  state = { policy = WHO, models = util.time_models(C, cfg.window, WHO), tracker = util.tracker(), solved = false }
end

-- The models learn one pass (a step in k micro-batches is k passes: util.per_pass);
-- the solve sees whole steps, micro-batches included, under each worker's cap.
local function observe(entry)
  local workers = entry.workers
  for i = 1, C.workers do
    local w = workers[i]
    if w.local_batch > 0 and w.compute_ms > 0 then state.models[i]:observe(util.per_pass(w)) end
  end
end

local function step_models() return cfg.step_models(state.models) end

local function solve(current)
  local models = step_models()
  local plan, predicted = minmax.solve(models, C.global_batch, lo, cfg.hi, { method = cfg.solver })
  if not plan then error('lbb: ' .. predicted, 3) end
  return plan, predicted, minmax.max_time(models, current)
end

-- Samples to move from worker s to worker f (1-based), within their bounds; 0 when
-- no move lowers the pair's predicted max (integer granularity: a slow worker's
-- single sample can outweigh the gap).
local function fine_tune_amount(workers, s, f)
  local bs, bf = workers[s].local_batch, workers[f].local_batch
  local room = math.min(bs - lo[s], cfg.hi[f] - bf)
  if room <= 0 then return 0 end
  if cfg.move then return math.min(cfg.move, room) end
  -- Both ran (SE only looks at workers with a batch), so bs, bf >= 1.
  local ts, tf = workers[s].compute_ms, workers[f].compute_ms
  local models = step_models()
  local slope_s = models[s]:predict(bs) - models[s]:predict(bs - 1)
  local slope_f = models[f]:predict(bf + 1) - models[f]:predict(bf)
  local even = math.floor((ts - tf) / (slope_s + slope_f))
  local best_k, best = 0, ts
  for k = math.max(1, even), even + 1 do
    local t = math.max(ts - k * slope_s, tf + k * slope_f)
    if t < best then best_k, best = k, t end
  end
  return math.min(best_k, math.max(1, math.floor(bs / 4)), room)
end

local function issue(plan, stats, reason)
  state.tracker:issue(plan, stats.iteration)
  return { local_batch = plan, micro_batches = cfg.micro(plan), reason = reason }
end

-- The last n history entries (all under the plan in force): each one's SE, the
-- smallest of them, and each worker's mean over them (as worker tables).
local function recent(stats, n)
  local history = stats.history
  if type(history) ~= 'table' or #history == 0 then history = { stats } end
  n = math.min(n, #history)
  local min_se, sums = math.huge, {}
  for i = 1, C.workers do sums[i] = 0 end
  for k = #history - n + 1, #history do
    local workers = history[k].workers
    min_se = math.min(min_se, (stragglers.extent(workers)))
    for i = 1, C.workers do sums[i] = sums[i] + workers[i].compute_ms end
  end
  local mean = {}
  for i = 1, C.workers do
    mean[i] = { local_batch = stats.workers[i].local_batch, micro_batches = stats.workers[i].micro_batches,
                compute_ms = sums[i] / n }
  end
  return min_se, mean
end

function policy.step(stats)
  state.last_seen = util.each_new(stats, state.last_seen, observe)
  local current = util.batches(stats.workers)
  local rapid_plan = state.rapid_plan
  if state.tracker:update(current, stats.iteration) == 'applied' and rapid_plan and util.same(current, rapid_plan) then
    state.settle_until = stats.iteration + cfg.settle
    state.rapid_plan = nil
  end
  if not state.tracker:settled(cfg.confirm) then return nil end
  if not state.solved then
    for i = 1, C.workers do
      if not state.models[i]:ready() then return nil end -- a worker that has never run: nothing to model yet
    end
    state.solved = true
    local plan, predicted, before = solve(current)
    if util.same(plan, current) then return nil end
    return issue(plan, stats, ('initial solve: predicted max compute %.1f ms (plan in force %.1f ms)')
                                :format(predicted, before))
  end
  local min_se, mean = recent(stats, cfg.confirm)
  if min_se < cfg.ft then return nil end
  local se, slow, fast = stragglers.extent(mean)
  if not slow then return nil end
  local settling = state.settle_until and stats.iteration <= state.settle_until
  if min_se >= cfg.rt and not settling then
    for i = 1, C.workers do
      local w = mean[i]
      if w.local_batch > 0 and w.compute_ms > 0 then state.models[i]:refit_latest(util.per_pass(w)) end
    end
    local plan, predicted, before = solve(current)
    if util.same(plan, current) then return nil end
    state.rapid_plan = plan
    return issue(plan, stats, ('rapid-tune: SE %.2f >= %.2f (slowest rank %d); models refit from the latest '
                               .. 'observations; predicted max compute %.1f ms (now %.1f ms)')
                                :format(se, cfg.rt, slow - 1, predicted, before))
  end
  local k = fine_tune_amount(mean, slow, fast)
  if k == 0 then return nil end
  local plan = {}
  for i = 1, C.workers do plan[i] = current[i] end
  plan[slow], plan[fast] = plan[slow] - k, plan[fast] + k
  return issue(plan, stats, ('fine-tune: SE %.3f; %d sample%s from rank %d to rank %d%s')
                              :format(se, k, k == 1 and '' or 's', slow - 1, fast - 1,
                                      settling and ' (settling after a rapid-tune)' or ''))
end

function policy.save() return state end

function policy.restore(saved)
  local whole, took_models
  state, whole, took_models = util.restore_models(state, saved, WHO, C.workers)
  -- Models from another policy come with their history: no initial solve needed.
  if took_models and not whole then state.solved = true end
end

return policy
