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
--
-- save()/restore(): models, plan tracker and counters (from another policy: its
-- tracker, and its models when it saved compatible ones, as lbb does).
local util = require 'tandem.policy_util'
local perf_model = require 'tandem.perf_model'
local minmax = require 'tandem.minmax'
local stragglers = require 'tandem.stragglers'

local WHO = 'boa'
local policy = {}
local C, cfg, models, tracker, last_seen, lo
local stale, stale_ms, prev_batch, refits, resolve, basis

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
  models = util.time_models(C, cfg.window, WHO)
  stale, stale_ms, prev_batch = {}, {}, {}
  for i = 1, C.workers do stale[i], stale_ms[i], prev_batch[i] = 0, 0, 0 end
  lo = util.solve_minima(C, WHO)
  tracker = util.tracker()
  last_seen, refits, resolve, basis = nil, {}, true, {}
end

-- Feeds one history entry to the models, counting mispredictions at unchanged
-- batches (a misprediction at a new batch is the slope being learnt, not a change
-- of speed) and summing their times.
local function observe(entry)
  local watch = { stale = stale, stale_ms = stale_ms, prev_batch = prev_batch }
  for i = 1, C.workers do
    local w = entry.workers[i]
    util.observe_model(models[i], watch, i, w.local_batch, w.compute_ms, cfg.model_change)
  end
end

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
    if stale[i] > 0 then any = true break end
  end
  if not any then return {} end
  local labels = stragglers.classify(stats.history or { stats }, cfg.classify)
  local done = {}
  for i = 1, C.workers do
    if stale[i] >= cfg.confirm or (stale[i] > 0 and labels[i] == 'dynamic') then
      models[i]:refit_latest(stats.workers[i].local_batch, stale_ms[i] / stale[i])
      stale[i], stale_ms[i] = 0, 0
      done[#done + 1] = i
    end
  end
  return done
end

-- Whether some worker's predicted time for its batch moved by more than min_gain
-- since the last solve (basis[i]: that prediction, false for a dropped worker).
local function drifted(current)
  for i = 1, C.workers do
    local b0 = basis[i]
    if current[i] > 0 and b0 then
      if math.abs(models[i]:predict(current[i]) - b0) > cfg.min_gain * b0 then return true end
    end
  end
  return false
end

function policy.step(stats)
  last_seen = util.each_new(stats, last_seen, observe)
  local current = util.batches(stats.workers)
  if tracker:update(current, stats.iteration) then resolve = true end
  for _, i in ipairs(refit_stale(stats)) do
    refits[#refits + 1] = i
    resolve = true
  end
  if not tracker:settled(cfg.settle) then return nil end
  for i = 1, C.workers do
    if not models[i]:ready() then return nil end -- a worker that has never run: nothing to model yet
  end
  if not (resolve or drifted(current)) then return nil end
  resolve = false
  local plan, predicted = minmax.solve(models, C.global_batch, lo, C.max_batch, { method = cfg.solver })
  if not plan then error('boa: ' .. predicted, 2) end
  for i = 1, C.workers do basis[i] = current[i] > 0 and models[i]:predict(current[i]) end
  local why = #refits > 0 and ('models of ranks %s refit to a new speed'):format(ranks(refits)) or 'models updated'
  refits = {}
  local before = minmax.max_time(models, current)
  if predicted > (1 - cfg.min_gain) * before or util.same(plan, current) then return nil end
  local labels = stragglers.classify(stats.history or { stats }, cfg.classify)
  local static = {}
  for i = 1, C.workers do
    if labels[i] == 'static' then static[#static + 1] = i end
  end
  tracker:issue(plan, stats.iteration)
  return {
    local_batch = plan,
    reason = ('%s; static stragglers: %s; predicted max compute %.1f ms (plan in force %.1f ms)')
             :format(why, #static > 0 and ranks(static) or 'none', predicted, before),
  }
end

function policy.save()
  local saved = {}
  for i = 1, C.workers do saved[i] = models[i]:save() end
  return { policy = WHO, models = saved, tracker = tracker:save(), last_seen = last_seen, stale = stale,
           stale_ms = stale_ms, prev_batch = prev_batch, basis = basis, resolve = resolve, refits = refits }
end

function policy.restore(state)
  if type(state) ~= 'table' then return end
  if state.tracker then tracker = util.load_tracker(state.tracker) end
  if type(state.models) == 'table' and #state.models == C.workers then
    for i = 1, C.workers do models[i] = perf_model.load(state.models[i]) end
    last_seen = state.last_seen
  end
  if state.policy == WHO then
    for i = 1, C.workers do
      stale[i], stale_ms[i] = state.stale[i], state.stale_ms[i]
      prev_batch[i], basis[i] = state.prev_batch[i], state.basis[i]
    end
    resolve, refits = state.resolve, state.refits
  end
end

return policy
