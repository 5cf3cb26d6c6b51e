-- tandem.policy_util: what the balancing policies (scripts/policies/) share: reading
-- the cluster, its params and the stats of the policy protocol, splitting the global
-- batch in proportion to weights within per-worker bounds, checking a plan, setting
-- up the model-based policies' time models and solve bounds, and tracking the plan
-- lag.
--
-- The plan lag is the design point here. A plan returned on iteration t's stats
-- applies from t+2 or t+3, so the next stats still show the old plan. A policy that
-- re-decided from those would chase its own past (move samples twice, oscillate).
-- The tracker below therefore follows the batches the stats report (the real ones),
-- knows which plan it is waiting for, and counts how many observations the plan in
-- force has had; policies judge a plan only once it has run. A plan that never shows
-- up (the engine rejected it, or a hot swap replaced it) is given up after a few
-- iterations, so a policy never waits forever. A tracker is plain data with its
-- methods in its class, so it lives in a policy's state table; load_tracker gives
-- a copied one its methods back.
local perf_model = require 'tandem.perf_model'

local U = {}

-- The defaults init() took, by parameter name, each as { default } (an empty table
-- for a parameter with no default value): the sandbox reads them after init() so
-- the console's policy() can show every parameter in force, defaults marked.
-- read_cluster starts it afresh.
U.defaults_taken = {}

local function took_default(key, default)
  U.defaults_taken[key] = { default }
  return default
end

local floor, huge = math.floor, math.huge

local function is_int(v) return type(v) == 'number' and v == floor(v) and v > -huge and v < huge end

local function int_array(t, n, what, who)
  if type(t) ~= 'table' or #t ~= n then
    error(string.format('%s: cluster.%s must be an array of %d integers (one per worker), got %s', who, what, n,
                        type(t) == 'table' and ('%d entries'):format(#t) or type(t)), 3)
  end
  local out = {}
  for i = 1, n do
    if not is_int(t[i]) or t[i] < 0 then
      error(string.format('%s: cluster.%s[%d] must be a non-negative integer, got %s', who, what, i, tostring(t[i])), 3)
    end
    out[i] = t[i]
  end
  return out
end

-- Validates the cluster table of init(cluster) and returns a normalized copy:
-- { workers = N, global_batch = B, min_batch = {..}, max_batch = {..}, devices = {..},
--   params = {..}, history = W }. `who` names the policy in error messages.
function U.read_cluster(cluster, who)
  if type(cluster) ~= 'table' then error(who .. ': init(cluster) needs the cluster table, got ' .. type(cluster), 2) end
  local n, B = cluster.workers, cluster.global_batch
  if not is_int(n) or n < 1 then
    error(who .. ': cluster.workers must be a positive integer, got ' .. tostring(n), 2)
  end
  if not is_int(B) or B < 0 then
    error(who .. ': cluster.global_batch must be a non-negative integer, got ' .. tostring(B), 2)
  end
  local lo = int_array(cluster.min_batch, n, 'min_batch', who)
  local hi = int_array(cluster.max_batch, n, 'max_batch', who)
  -- max_batch bounds what a worker holds at once, its micro-batch: its local batch
  -- may be up to MAX_MICRO times that, in micro-batches (U.micro_batches).
  local local_max = {}
  local sum_lo, sum_hi = 0, 0
  for i = 1, n do
    if lo[i] > hi[i] * U.MAX_MICRO then
      error(string.format('%s: worker %d has min_batch %d above %d micro-batches of its max_batch %d', who, i, lo[i],
                          U.MAX_MICRO, hi[i]), 2)
    end
    local_max[i] = hi[i] * U.MAX_MICRO
    sum_lo, sum_hi = sum_lo + lo[i], sum_hi + local_max[i]
  end
  if B < sum_lo or B > sum_hi then
    error(string.format('%s: global_batch %d cannot be split within the bounds (sum of min_batch %d, of max_batch in '
                          .. '%d micro-batches %d)', who, B, sum_lo, U.MAX_MICRO, sum_hi), 2)
  end
  U.defaults_taken = {}
  local params = cluster.params
  if params ~= nil and type(params) ~= 'table' then
    error(who .. ': cluster.params must be a table, got ' .. type(params), 2)
  end
  return {
    workers = n, global_batch = B, min_batch = lo, max_batch = hi, local_max = local_max,
    devices = cluster.devices or {}, params = params or {}, history = cluster.history or 1,
  }
end

-- The most micro-batches a worker may compute a local batch in (the engine's
-- kMaxMicroBatches, engine/train/plan.hpp).
U.MAX_MICRO = 1024

-- Each worker's micro-batches for `plan` under its cap (a micro-batch holds at most
-- caps[i] samples): ceil(b_i / caps[i]), at least 1; nil when every one is 1 (the
-- plan then carries none, and the engine uses the experiment's accumulate).
function U.micro_batches(plan, caps)
  local out, any = {}, false
  for i = 1, #plan do
    out[i] = perf_model.micro_count(plan[i], caps[i])
    if out[i] > 1 then any = true end
  end
  return any and out or nil
end

-- The workers' time models as tandem.minmax sees them under their caps: a local
-- batch above a worker's cap takes several micro-batches, each paying a pass
-- (tandem.perf_model.micro_batched).
function U.micro_models(models, caps)
  local out = {}
  for i = 1, #models do out[i] = perf_model.micro_batched(models[i], caps[i], U.MAX_MICRO) end
  return out
end

-- params[key] as a boolean (default when nil).
function U.bool_param(params, key, default, who)
  local v = params[key]
  if v == nil then
    took_default(key, default)
    return default
  end
  if type(v) ~= 'boolean' then error(('%s: params.%s must be true or false, got %s'):format(who, key, tostring(v)), 3) end
  return v
end

-- How a model-based policy (boa, lbb) treats the caps: with params.micro_batches
-- (default true) a cap bounds the micro-batch, the solve sees whole steps in
-- micro-batches and local batches up to C.local_max; without, a cap bounds the local
-- batch (the plans before issue 37). Returns the step models' maker, the local
-- batches' bounds and the plan's micro-batches' maker.
function U.cap_rule(C, who)
  if U.bool_param(C.params, 'micro_batches', true, who) then
    return function(models) return U.micro_models(models, C.max_batch) end, C.local_max,
           function(plan) return U.micro_batches(plan, C.max_batch) end
  end
  return function(models) return models end, C.max_batch, function() return nil end
end

-- A worker's stats as one pass's: its step of local_batch samples in micro_batches
-- (1 when the stats hold none) is that many passes of local_batch / micro_batches.
function U.per_pass(w)
  local k = (type(w.micro_batches) == 'number' and w.micro_batches >= 1) and w.micro_batches or 1
  return w.local_batch / k, w.compute_ms / k
end

-- The minima a model-based solve works with (c from read_cluster): min_batch,
-- raised to 1 unless params.allow_drop (boa, lbb) or the global batch is too small
-- to give everyone a sample. t(0) = 0 makes dropping a worker look free of its fixed
-- cost, but a dropped worker is never measured again, and on a busy host even an
-- idle worker's compute_ms is not 0: a model's intercept is too weak a reason to
-- stop using a worker.
function U.solve_minima(c, who)
  local allow_drop = c.params.allow_drop
  if allow_drop == nil then took_default('allow_drop', false) end
  if allow_drop ~= nil and type(allow_drop) ~= 'boolean' then
    error(who .. ': params.allow_drop must be true or false, got ' .. tostring(allow_drop), 2)
  end
  local lo, sum = {}, 0
  for i = 1, c.workers do
    lo[i] = c.min_batch[i]
    if not allow_drop and lo[i] < 1 and c.max_batch[i] >= 1 then lo[i] = 1 end
    sum = sum + lo[i]
  end
  if sum > c.global_batch then return c.min_batch end
  return lo
end

-- One time model per worker (c from read_cluster): the piecewise model of its
-- warm-up profile when params.profile has one (indexed by worker, 1-based, or by
-- device name), else a linear model over a sliding window.
function U.time_models(c, window, who)
  local profile = c.params.profile
  if profile == nil then took_default('profile', nil) end
  if profile ~= nil and type(profile) ~= 'table' then
    error(who .. ': params.profile must be a table of warm-up profiles, by worker or by device name', 2)
  end
  local models = {}
  for i = 1, c.workers do
    local points = profile and (profile[i] or profile[c.devices[i]])
    models[i] = points and perf_model.piecewise { points = points } or perf_model.linear { window = window }
  end
  return models
end

-- The time models in a saved policy state (boa, lbb and grouped keep theirs as
-- `models`), given their methods back, when it holds one per worker; else nil.
local function saved_models(saved, workers)
  if type(saved.models) ~= 'table' or #saved.models ~= workers then return nil end
  local models = {}
  for i = 1, workers do models[i] = perf_model.load(saved.models[i]) end
  return models
end

-- restore(saved) of a policy that keeps time models (boa, lbb, grouped): the state
-- it leaves. `saved` itself when it is that policy's whole state for this many
-- workers (its models and tracker given their methods back); else `state` with
-- what another policy's save holds that this one keeps too: the plan tracker (when
-- `state` has one) and the models, when one per worker, with the iteration they
-- have seen. Then whether `saved` was taken whole, and whether its models were.
function U.restore_models(state, saved, who, workers)
  if type(saved) ~= 'table' then return state, false, false end
  local models = saved_models(saved, workers)
  if saved.policy == who and models then
    saved.models = models
    if saved.tracker then saved.tracker = U.load_tracker(saved.tracker) end
    return saved, true, true
  end
  if saved.tracker and state.tracker then state.tracker = U.load_tracker(saved.tracker) end
  if models then state.models, state.last_seen = models, saved.last_seen end
  return state, false, models ~= nil
end

-- Worker i's observation (b samples in ms) for its time model, counting
-- mispredictions at an unchanged batch (a misprediction at a new batch is the slope
-- being learnt, not a change of speed) and summing their times, for a refit once
-- they persist. w holds stale, stale_ms and prev_batch, each by worker (a policy's
-- state table does).
function U.observe_model(model, w, i, b, ms, change)
  -- (An infinite or NaN time is no observation: summed into stale_ms it would stay
  -- infinite and break every refit after it.)
  if b > 0 and ms > 0 and ms < huge then
    if b == w.prev_batch[i] and model:ready() then
      local predicted = model:predict(b)
      if math.abs(ms - predicted) > change * predicted then
        w.stale[i], w.stale_ms[i] = w.stale[i] + 1, w.stale_ms[i] + ms
      else
        w.stale[i], w.stale_ms[i] = 0, 0
      end
    end
    model:observe(b, ms)
  end
  w.prev_batch[i] = b
end

-- params.solver checked against tandem.minmax's methods (nil: its default).
function U.solver(params, who)
  local s = params.solver
  if s == nil then took_default('solver', nil) end
  if s ~= nil and s ~= 'lp' and s ~= 'bisect' and s ~= 'milp' and s ~= 'greedy' then
    error(who .. ": params.solver must be 'lp', 'bisect', 'milp' or 'greedy', got " .. tostring(s), 2)
  end
  return s
end

-- params[key] as a number within [min, max], or the default when absent.
function U.param(params, key, default, min, max, who)
  local v = params[key]
  if v == nil then return took_default(key, default) end
  if type(v) ~= 'number' or v ~= v or (min and v < min) or (max and v > max) then
    error(string.format('%s: params.%s must be a number in [%s, %s], got %s', who, key, tostring(min or -huge),
                        tostring(max or huge), tostring(v)), 2)
  end
  return v
end

-- U.param for a whole number (a count of iterations, groups, versions).
function U.int_param(params, key, default, min, max, who)
  local v = U.param(params, key, default, min, max, who)
  if v ~= nil and v ~= floor(v) then
    error(('%s: params.%s must be an integer, got %s'):format(who, key, tostring(v)), 2)
  end
  return v
end

-- The local batches the stats report (what the workers really ran).
function U.batches(workers)
  local b = {}
  for i = 1, #workers do b[i] = workers[i].local_batch end
  return b
end

function U.same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

-- Samples that change hands between plans a and b (half the L1 distance).
function U.moved(a, b)
  local m = 0
  for i = 1, #a do
    if b[i] > a[i] then m = m + b[i] - a[i] end
  end
  return m
end

-- true, or false and the first problem: the checks the engine makes on a plan.
function U.check_plan(batches, lo, hi, B)
  if type(batches) ~= 'table' or #batches ~= #lo then
    return false, ('the plan needs %d local batches, got %s'):format(#lo, type(batches) == 'table' and #batches or type(batches))
  end
  local sum = 0
  for i = 1, #lo do
    local b = batches[i]
    if not is_int(b) then return false, ('local_batch[%d] = %s is not an integer'):format(i, tostring(b)) end
    if b < lo[i] or b > hi[i] then
      return false, ('local_batch[%d] = %d is outside [%d, %d]'):format(i, b, lo[i], hi[i])
    end
    sum = sum + b
  end
  if sum ~= B then return false, ('the local batches sum to %d, not the global batch %d'):format(sum, B) end
  return true
end

-- sum_i clamp(scale * w_i, lo_i, hi_i): the continuous proportional split at `scale`.
local function clamped_total(scale, w, lo, hi)
  local s = 0
  for i = 1, #w do
    local x = scale * w[i]
    if x < lo[i] then x = lo[i] elseif x > hi[i] then x = hi[i] end
    s = s + x
  end
  return s
end

-- Integer local batches proportional to the non-negative weights w, summing to B,
-- each within [lo_i, hi_i]: the continuous split x_i = clamp(scale * w_i, lo_i, hi_i)
-- with the scale that makes the x_i sum to B, then floors and the largest-remainder
-- rule (ties to the lower rank). The scale is found among the breakpoints lo_i/w_i,
-- hi_i/w_i (the total is piecewise linear between them): a binary search over the
-- sorted breakpoints, then one linear solve, O(N log N).
-- Returns the batches, or nil and why when sum lo > B or sum hi < B.
function U.proportional_split(w, B, lo, hi)
  local n = #w
  local sum_lo, sum_hi = 0, 0
  for i = 1, n do sum_lo, sum_hi = sum_lo + lo[i], sum_hi + hi[i] end
  if B < sum_lo or B > sum_hi then
    return nil, ('global batch %d cannot be split within the bounds (sum of minima %d, of maxima %d)')
                :format(B, sum_lo, sum_hi)
  end
  local points = { 0 }
  for i = 1, n do
    if w[i] > 0 then
      points[#points + 1] = lo[i] / w[i]
      points[#points + 1] = hi[i] / w[i]
    end
  end
  table.sort(points)
  -- Largest breakpoint whose total is <= B; the answer lies between it and the next.
  local l, r = 1, #points
  while l < r do
    local mid = floor((l + r + 1) / 2)
    if clamped_total(points[mid], w, lo, hi) <= B then l = mid else r = mid - 1 end
  end
  local s0 = points[l]
  local f0 = clamped_total(s0, w, lo, hi)
  local scale = s0
  if f0 < B then
    -- Between breakpoints the total grows with slope sum of w_i over unclamped workers.
    -- Unclamped just above s0: decided on the breakpoints themselves (s0 is one of
    -- them, computed the same way), never on s0 * w_i, which can land a rounding
    -- error below lo_i and drop the worker from the slope.
    local slope = 0
    for i = 1, n do
      if w[i] > 0 and lo[i] / w[i] <= s0 and s0 < hi[i] / w[i] then slope = slope + w[i] end
    end
    if slope > 0 then scale = s0 + (B - f0) / slope end
  end
  local out, frac, total = {}, {}, 0
  for i = 1, n do
    local x = scale * w[i]
    if x < lo[i] then x = lo[i] elseif x > hi[i] then x = hi[i] end
    local b = floor(x)
    out[i], frac[i], total = b, x - b, total + b
  end
  -- Hand the remainder out by largest fractional part. The floors never exceed B;
  -- rounding error (or all-zero weights) can leave more than one sample per worker
  -- to hand out, so cycle until exact (room is guaranteed: sum hi >= B).
  local rest = B - total
  if rest > 0 then
    local order = {}
    for i = 1, n do order[i] = i end
    table.sort(order, function(a, b)
      if frac[a] ~= frac[b] then return frac[a] > frac[b] end
      return a < b
    end)
    while rest > 0 do
      for _, i in ipairs(order) do
        if rest == 0 then break end
        if out[i] < hi[i] then out[i], rest = out[i] + 1, rest - 1 end
      end
    end
  end
  return out
end

-- B split as evenly as the bounds allow (lower ranks take the remainder).
function U.equal_split(B, lo, hi)
  local w = {}
  for i = 1, #lo do w[i] = 1 end
  return U.proportional_split(w, B, lo, hi)
end

-- Calls fn(entry) for the history entries newer than `last_seen` (an iteration
-- number; nil for none seen yet), oldest first, and returns the newest iteration.
-- Entries are { iteration, workers }; without history the stats themselves are the
-- one new entry. On a policy's first call this replays the whole window, so a policy
-- swapped in mid-run starts from everything the engine kept.
function U.each_new(stats, last_seen, fn)
  local history = stats.history
  if type(history) ~= 'table' or #history == 0 then history = { stats } end
  local first = #history + 1
  while first > 1 and (last_seen == nil or history[first - 1].iteration > last_seen) do first = first - 1 end
  for k = first, #history do fn(history[k]) end
  local newest = history[#history].iteration
  if last_seen ~= nil and last_seen > newest then return last_seen end
  return newest
end

-- The plan tracker (see the header). update(batches) once per step with the
-- batches the stats report; issue(plan, iteration) when a plan is returned.
local Tracker = {}
Tracker.__index = Tracker

-- max_wait: iterations after which a plan that has not shown up is given up.
function U.tracker(max_wait)
  return setmetatable({ max_wait = max_wait or 6, run = 0 }, Tracker)
end

-- Returns 'applied' on the first stats that show the pending plan, 'given_up' when
-- it waited too long, else nil.
function Tracker:update(batches, iteration)
  if self.current and U.same(batches, self.current) then
    self.run = self.run + 1
  else
    self.current, self.run = batches, 1
  end
  if self.pending then
    if U.same(batches, self.pending) then
      self.pending, self.issued_at = nil, nil
      return 'applied'
    elseif iteration - self.issued_at > self.max_wait then
      self.pending, self.issued_at = nil, nil
      return 'given_up'
    end
  end
end

function Tracker:issue(plan, iteration) self.pending, self.issued_at = plan, iteration end

-- True once no plan is pending and the plan in force has run for k observations.
function Tracker:settled(k) return self.pending == nil and self.run >= (k or 1) end

function Tracker:save()
  return { max_wait = self.max_wait, run = self.run, current = self.current, pending = self.pending,
           issued_at = self.issued_at }
end

function U.load_tracker(state)
  local t = U.tracker(state.max_wait)
  t.run, t.current, t.pending, t.issued_at = state.run or 0, state.current, state.pending, state.issued_at
  return t
end

return U
