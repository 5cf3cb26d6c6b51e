-- boa: BOA, batch orchestration for heterogeneous GPU clusters (J. Supercomputing 76,
-- 2020). Per-worker performance models fitted from measurements (time vs local
-- batch), a min-max integer program over them (tandem.minmax: minimize the largest
-- predicted compute time, sum b = B, within memory caps), and a distinction between
-- static stragglers (slower devices: persistent) and dynamic ones (transient).
--
-- The paper leaves the model form, thresholds and numbers unpublished; the choices:
--   - models: tandem.perf_model.linear over a sliding window of (batch, ms), or, when
--     params.profile gives a warm-up profile, the piecewise (flat, then linear) model
--     of it, scaled to the training observations;
--   - static stragglers need nothing beyond the models: their slowness is in their
--     model and the solve already gives them less;
--   - a dynamic straggler (tandem.stragglers: slower than its own recent median)
--     whose latest time is off its model by more than model_change has its model
--     refit from the latest observation at once (the window holds another speed);
--     any worker off by that much for `confirm` observations in a row at an unchanged
--     batch (a recovery, or a slowdown the classifier does not call dynamic) is
--     refit from their mean;
--   - no worker is dropped (b = 0) unless params.allow_drop: a dropped worker is
--     never measured again, and a model whose intercept is noise would drop it for
--     a saving that does not exist;
--   - re-solve when the models changed materially: a new plan has run (its batches
--     tell the models new slopes), a model was refit, or a worker's predicted time
--     for its batch moved by more than min_gain since the last solve (slow drift);
--     adopt the solution only if its predicted max time beats the plan in force by
--     min_gain (no churn);
--   - judge a plan only after it has run `settle` times (plans apply 2-3 iterations
--     after the stats they come from).
--
-- Parameters (cluster.params), with defaults:
--   window = 20         observations per linear model
--   profile             warm-up profile: per worker ({ [1] = {{b, ms}, ...}, ... }) or
--                       per device name ({ ['GTX 1060'] = {{b, ms}, ...} })
--   min_gain = 0.03     adopt a new plan only if it predicts this much less max time
--   model_change = 0.1  relative misprediction that marks a model stale
--   confirm = 2         stale observations in a row before refitting (non-dynamic)
--   settle = 1          observations under a new plan before judging it
--   slow = 0.8, persist = 0.7, drop = 0.2, recent = 3   tandem.stragglers.classify
--   allow_drop = false  let the solve give a worker 0 samples (when min_batch is 0)
--   solver              tandem.minmax method (default: its own choice)
--   micro_batches = true  a cap bounds a worker's micro-batch, not its local batch
--                         (as lbb: the solve gives micro-batches; false: the plans
--                         before issue 37)
--
-- State: everything step() learns lives in one table, `state`, which save() returns
-- as it is and restore() takes back whole (from another policy: its tracker, and
-- its models when it saved one per worker, as lbb does). Its models and tracker are
-- plain data (their methods live in their modules), so the copy restore() gets
-- needs only them given their methods back.
local util = require 'tandem.policy_util'
local minmax = require 'tandem.minmax'
local stragglers = require 'tandem.stragglers'

local WHO = 'boa'
local policy = {}
local C, cfg, lo -- the cluster, the parameters, the solve's minima: fixed by init()
-- state = {
--   policy = 'boa',
--   models               per worker: its time model (tandem.perf_model)
--   tracker              the plan tracker (tandem.policy_util)
--   last_seen            the newest iteration observed
--   stale, stale_ms, prev_batch   per worker: mispredictions in a row at an unchanged
--                        batch, their summed ms, the batch last seen (policy_util.observe_model)
--   basis                per worker: its predicted time at the last solve (false: dropped)
--   resolve              the models changed materially since the last solve
--   refits               ranks (1-based) refit since the last solve, for the reason
-- }
local state

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  local p = C.params
  cfg = {
    window = util.param(p, 'window', 20, 1, nil, WHO),
    min_gain = util.param(p, 'min_gain', 0.03, 0, 1, WHO),
    model_change = util.param(p, 'model_change', 0.1, 0, nil, WHO),
    confirm = util.param(p, 'confirm', 2, 1, nil, WHO),
    settle = util.param(p, 'settle', 1, 1, nil, WHO),
    classify = { slow = util.param(p, 'slow', 0.8, 0, 1, WHO), persist = util.param(p, 'persist', 0.7, 0, 1, WHO),
                 drop = util.param(p, 'drop', 0.2, 0, 1, WHO), recent = util.param(p, 'recent', 3, 1, nil, WHO) },
    solver = util.solver(p, WHO),
  }
  lo = util.solve_minima(C, WHO)
  cfg.step_models, cfg.hi, cfg.micro = util.cap_rule(C, WHO)
  state = { policy = WHO, models = util.time_models(C, cfg.window, WHO), tracker = util.tracker(), stale = {},
            stale_ms = {}, prev_batch = {}, basis = {}, resolve = true, refits = {} }
  for i = 1, C.workers do state.stale[i], state.stale_ms[i], state.prev_batch[i] = 0, 0, 0 end
end

-- Feeds one history entry to the models, counting mispredictions at unchanged
-- batches (a misprediction at a new batch is the slope being learnt, not a change
-- of speed) and summing their times.
-- The models are of one pass: a step in k micro-batches is k of them (util.per_pass).
local function observe(entry)
  for i = 1, C.workers do
    local b, ms = util.per_pass(entry.workers[i])
    util.observe_model(state.models[i], state, i, b, ms, cfg.model_change)
  end
end

-- The models of whole steps, micro-batches included, under each worker's cap.
local function step_models() return cfg.step_models(state.models) end

local function ranks(list)
  local out = {}
  for k = 1, math.min(#list, 6) do out[k] = tostring(list[k] - 1) end
  if #list > 6 then out[#out + 1] = ('... (%d)'):format(#list) end
  return table.concat(out, ',')
end

-- Refits the stale models; returns the ranks refit (1-based).
local function refit_stale(stats)
  local any = false
  for i = 1, C.workers do
    if state.stale[i] > 0 then any = true break end
  end
  if not any then return {} end
  local labels = stragglers.classify(stats.history or { stats }, cfg.classify)
  local done = {}
  for i = 1, C.workers do
    if state.stale[i] >= cfg.confirm or (state.stale[i] > 0 and labels[i] == 'dynamic') then
      local b = util.per_pass(stats.workers[i])  -- stale_ms sums per-pass times (observe)
      state.models[i]:refit_latest(b, state.stale_ms[i] / state.stale[i])
      state.stale[i], state.stale_ms[i] = 0, 0
      done[#done + 1] = i
    end
  end
  return done
end

-- Whether some worker's predicted time for its batch moved by more than min_gain
-- since the last solve (basis[i]: that prediction, false for a dropped worker).
local function drifted(current)
  local models = step_models()
  for i = 1, C.workers do
    local b0 = state.basis[i]
    if current[i] > 0 and b0 then
      if math.abs(models[i]:predict(current[i]) - b0) > cfg.min_gain * b0 then return true end
    end
  end
  return false
end

function policy.step(stats)
  state.last_seen = util.each_new(stats, state.last_seen, observe)
  local current = util.batches(stats.workers)
  if state.tracker:update(current, stats.iteration) then state.resolve = true end
  for _, i in ipairs(refit_stale(stats)) do
    state.refits[#state.refits + 1] = i
    state.resolve = true
  end
  if not state.tracker:settled(cfg.settle) then return nil end
  for i = 1, C.workers do
    if not state.models[i]:ready() then return nil end -- a worker that has never run: nothing to model yet
  end
  if not (state.resolve or drifted(current)) then return nil end
  state.resolve = false
  local models = step_models()
  local plan, predicted = minmax.solve(models, C.global_batch, lo, cfg.hi, { method = cfg.solver })
  if not plan then error('boa: ' .. predicted, 2) end
  for i = 1, C.workers do state.basis[i] = current[i] > 0 and models[i]:predict(current[i]) end
  local refits = state.refits
  local why = #refits > 0 and ('models of ranks %s refit to a new speed'):format(ranks(refits)) or 'models updated'
  state.refits = {}
  local before = minmax.max_time(models, current)
  if predicted > (1 - cfg.min_gain) * before or util.same(plan, current) then return nil end
  local labels = stragglers.classify(stats.history or { stats }, cfg.classify)
  local static = {}
  for i = 1, C.workers do
    if labels[i] == 'static' then static[#static + 1] = i end
  end
  state.tracker:issue(plan, stats.iteration)
  return {
    local_batch = plan,
    micro_batches = cfg.micro(plan),
    reason = ('%s; static stragglers: %s; predicted max compute %.1f ms (plan in force %.1f ms)')
             :format(why, #static > 0 and ranks(static) or 'none', predicted, before),
  }
end

function policy.save() return state end

function policy.restore(saved) state = util.restore_models(state, saved, WHO, C.workers) end

return policy
