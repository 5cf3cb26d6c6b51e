-- tandem.minmax: the min-max batch allocation of BOA and LBB,
--     minimize max_i t_i(b_i)  subject to  sum_i b_i = B,  lo_i <= b_i <= hi_i,  b_i integer,
-- for per-worker time models t_i (tandem.perf_model: predict, inverse, pieces), each
-- nondecreasing in b with t_i(0) = 0 (a worker given no samples computes nothing; a
-- worker can be dropped only when lo_i = 0).
--
-- BOA states this as an integer program; LBB's code solves the continuous relaxation
-- and rounds, which can miss sum b = B. Here the relaxation only supplies a lower
-- bound T_lb on the optimum, and an exact integer finish does the rest:
--   1. start from s_i = clamp(floor(inverse_i(T_lb)), lo_i, hi_i), the most samples
--      worker i can take without exceeding T_lb (or lo_i);
--   2. while sum s < B, give one sample to the worker whose time after the increment
--      is smallest (a binary heap: O(log N) a sample);
--   3. if sum s > B instead, take samples back from the slowest workers.
-- Why this is exact: let T* be the integer optimum, b* an optimal allocation. Every
-- start time t_i(s_i) is <= T_lb <= T* (or t_i(lo_i) <= t_i(b*_i) <= T*). While
-- sum s < B there is a worker j with s_j < b*_j (else sum s >= sum b* = B), and its
-- increment costs t_j(s_j + 1) <= t_j(b*_j) <= T* because t_j is nondecreasing; the
-- greedy takes the cheapest increment, so no step ever exceeds T*. If instead
-- sum s >= B, then T* <= T_lb, hence T* = T_lb, and removing samples (never below
-- lo_i) keeps every time <= T*. Only monotonicity is used, so the finish is exact
-- for any nondecreasing model; the bound only decides how much work is left to it
-- (with a tight bound, under N samples: the floors' fractions).
-- One case makes any bound loose: a worker pinned at its minimum whose t_i(lo_i)
-- alone sets T* (a slow device's fixed cost above what the others need). Then the
-- start at T_lb = T* holds far more than B samples, and step 3 would take them back
-- one at a time (tens of thousands at 1024 workers). So a start holding more than B
-- is lowered first: the largest level T <= T_lb whose start holds at most B, found by
-- bisection. Its times are <= T <= T* and its sum <= B, which is all step 2's
-- argument needs (any start with s_i >= lo_i, t_i(s_i) <= T* and sum s <= B); with
-- the level tight, step 2 again moves under N samples.
--
-- Where the bound comes from (opts.method):
--   'lp'      the LP relaxation, built with lpsolve (the default up to
--             opts.lp_max_workers = 256 workers): T >= a*b_i + c for every piece
--             (a, c) of t_i, sum b_i = B, lo_i <= b_i <= hi_i. Its optimum is lowered
--             by a relative 1e-9, so the solver's tolerance cannot put the start
--             above T*. When lo_i = 0 a piece with c > 0 would wrongly force T >= c
--             on a dropped worker, so it is replaced by the chord from the origin,
--             T >= (a + c/hi_i) b_i, which lies below the piece on [1, hi_i] and is
--             0 at b_i = 0: still a valid relaxation. T >= max_i t_i(lo_i) is T's
--             lower bound. A failed LP falls back to 'bisect'.
--   'bisect'  the same continuous relaxation solved in Lua by bisection on T over
--             the models' inverse (the default above 256 workers: lp_solve's simplex
--             on this LP takes ~0.5 ms at 64 workers, ~8 ms at 256 but ~60-100 ms at
--             1024, past a policy's 50 ms budget; bisection takes ~1.5 ms there,
--             interpreted as policies run).
--   'milp'    lp_solve's branch and bound on the exact integer program (a binary
--             z_i per droppable worker: b_i <= hi_i z_i, b_i >= z_i,
--             a*b_i + c*z_i <= T), for comparison; its answer still passes the finish.
--   'greedy'  no bound: the finish starts from lo. Exact, O(B log N): the reference.
--
-- solve(models, B, lo, hi [, opts]) returns batches, T (the predicted max time) and
-- info {method, lower_bound, steps (samples the finish moved), status (lp_solve's)};
-- or nil and a message when no allocation exists (sum lo > B or sum hi < B) or the
-- MILP solver fails. opts.time_limit_s bounds lp_solve (1 s for 'lp', 10 s for
-- 'milp'). Malformed arguments raise.
local M = {}

local floor, huge, max, min = math.floor, math.huge, math.max, math.min

local function is_int(v) return type(v) == 'number' and v == floor(v) and v > -huge and v < huge end

-- Validates the arguments; returns N, the caps tightened to what B allows (a worker
-- never gets more than B minus the others' minima), or nil and why when infeasible.
local function prepare(models, B, lo, hi)
  if type(models) ~= 'table' or #models == 0 then
    error('minmax: models must be a non-empty array of performance models (tandem.perf_model)', 3)
  end
  local n = #models
  if not is_int(B) or B < 0 then error('minmax: the global batch B must be a non-negative integer, got ' .. tostring(B), 3) end
  if type(lo) ~= 'table' or type(hi) ~= 'table' or #lo ~= n or #hi ~= n then
    error(('minmax: lo and hi must be arrays of %d integers (one per model)'):format(n), 3)
  end
  local sum_lo, sum_hi = 0, 0
  for i = 1, n do
    local m = models[i]
    if type(m) ~= 'table' or type(m.predict) ~= 'function' or type(m.inverse) ~= 'function' then
      error(('minmax: models[%d] must have predict(b) and inverse(T) (see tandem.perf_model)'):format(i), 3)
    end
    if not is_int(lo[i]) or not is_int(hi[i]) or lo[i] < 0 or lo[i] > hi[i] then
      error(('minmax: worker %d needs integer bounds 0 <= lo <= hi, got lo = %s, hi = %s'):format(i, tostring(lo[i]),
                                                                                           tostring(hi[i])), 3)
    end
    sum_lo, sum_hi = sum_lo + lo[i], sum_hi + hi[i]
  end
  if B < sum_lo or B > sum_hi then
    return nil, ('no allocation of %d samples fits the bounds: the minima sum to %d and the maxima to %d; '
                 .. 'raise the memory caps or lower the global batch'):format(B, sum_lo, sum_hi)
  end
  local cap = {}
  for i = 1, n do cap[i] = min(hi[i], B - (sum_lo - lo[i])) end
  return n, cap
end

function M.max_time(models, batches)
  local T = 0
  for i = 1, #models do T = max(T, models[i]:predict(batches[i])) end
  return T
end

-- Binary heap of worker indices ordered by key[i] (ties: lower index first).
local function less(key, x, y) return key[x] < key[y] or (key[x] == key[y] and x < y) end

local function sift_down(h, key, k)
  local n = #h
  while true do
    local l = 2 * k
    if l > n then return end
    local c = l
    if l + 1 <= n and less(key, h[l + 1], h[l]) then c = l + 1 end
    if not less(key, h[c], h[k]) then return end
    h[k], h[c] = h[c], h[k]
    k = c
  end
end

local function heapify(h, key)
  for k = floor(#h / 2), 1, -1 do sift_down(h, key, k) end
end

local function pop(h, key)
  local n = #h
  h[1] = h[n]
  h[n] = nil
  if n > 1 then sift_down(h, key, 1) end
end

-- Steps 2 and 3 of the header from the start b (modified in place); returns the
-- number of samples moved.
local function finish(models, B, lo, cap, b)
  local n, total = #b, 0
  for i = 1, n do total = total + b[i] end
  local key, h = {}, {}
  if total < B then
    for i = 1, n do
      if b[i] < cap[i] then
        key[i] = models[i]:predict(b[i] + 1)
        h[#h + 1] = i
      end
    end
    heapify(h, key)
    for _ = 1, B - total do
      local i = h[1]
      b[i] = b[i] + 1
      if b[i] < cap[i] then
        key[i] = models[i]:predict(b[i] + 1)
        sift_down(h, key, 1)
      else
        pop(h, key)
      end
    end
  elseif total > B then
    -- Slowest first: keys are negated times.
    for i = 1, n do
      if b[i] > lo[i] then
        key[i] = -models[i]:predict(b[i])
        h[#h + 1] = i
      end
    end
    heapify(h, key)
    for _ = 1, total - B do
      local i = h[1]
      b[i] = b[i] - 1
      if b[i] > lo[i] then
        key[i] = -models[i]:predict(b[i])
        sift_down(h, key, 1)
      else
        pop(h, key)
      end
    end
  end
  return math.abs(B - total)
end

local function start_at(models, T, lo, cap)
  local b = {}
  for i = 1, #models do
    local x = floor(models[i]:inverse(T))
    b[i] = max(lo[i], min(cap[i], x))
  end
  return b
end

-- Samples the start at level T holds: sum_i clamp(floor(inverse_i(T)), lo_i, cap_i).
local function start_total(models, T, lo, cap)
  local s = 0
  for i = 1, #models do
    local x = floor(models[i]:inverse(T))
    if x < lo[i] then x = lo[i] elseif x > cap[i] then x = cap[i] end
    s = s + x
  end
  return s
end

-- The start for a bound (see the header): start_at(bound), or, when that holds more
-- than B samples, the start at a level below the bound that holds at most B and
-- close to B. start_total is nondecreasing in T; the search keeps `low` a level
-- whose start holds <= B (0: every worker at lo, and sum lo <= B by prepare) and
-- `high` one holding more, and stops once `low` holds at least B - N samples (the
-- finish then moves at most N: about what two more passes would cost; identical
-- workers make start_total jump by their number at one level, so a bracket may
-- never get closer than that), or after 40 steps; the finish does the rest. The steps are false position (the
-- Illinois variant, which halves the weight of an end that stays put so the bracket
-- cannot stall): start_total is close to piecewise linear in T, so a step or two
-- lands within N/8, where bisection would take ~10 passes over N workers, which
-- matters for a policy run interpreted every iteration.
local function tight_start(models, B, lo, cap, bound)
  local high, high_total = bound, start_total(models, bound, lo, cap)
  if high_total <= B then return start_at(models, bound, lo, cap) end
  local low, low_total = 0, start_total(models, 0, lo, cap)
  local close = #models
  local w_low, w_high, side = 1, 1, 0
  for _ = 1, 40 do
    if B - low_total <= close or high - low <= 1e-12 * high then break end
    -- Weighted secant through (low, low_total - B) and (high, high_total - B).
    local f_low, f_high = w_low * (low_total - B), w_high * (high_total - B)
    local mid = low + (high - low) * f_low / (f_low - f_high)
    if not (mid > low and mid < high) then mid = 0.5 * (low + high) end
    local total = start_total(models, mid, lo, cap)
    if total <= B then
      low, low_total, w_low = mid, total, 1
      if side == -1 then w_high = 0.5 * w_high end
      side = -1
    else
      high, high_total, w_high = mid, total, 1
      if side == 1 then w_low = 0.5 * w_low end
      side = 1
    end
  end
  return start_at(models, low, lo, cap)
end

local function lower_bound_from_minima(models, lo)
  local T = 0
  for i = 1, #models do T = max(T, models[i]:predict(lo[i])) end
  return T
end

-- The continuous relaxation without an LP: total(T) = sum_i clamp(inverse_i(T), lo_i,
-- cap_i) is nondecreasing, and any integer allocation with max time T* has
-- total(T*) >= B. So every T with total(T) < B is below T*: bisection keeps such a
-- T as its lower end and returns it, a valid bound by construction (no tolerance).
-- 40 halvings, or fewer once the bracket is within 1e-7 relative: O(N) each.
local function bisect_bound(models, B, lo, cap, T0)
  local n = #models
  local function total(T)
    local s = 0
    for i = 1, n do
      local x = models[i]:inverse(T)
      if x < lo[i] then x = lo[i] elseif x > cap[i] then x = cap[i] end
      s = s + x
    end
    return s
  end
  if total(T0) >= B then return T0 end
  local low, high = T0, M.max_time(models, cap)
  for _ = 1, 40 do
    if high - low <= 1e-7 * high then break end
    local mid = 0.5 * (low + high)
    if total(mid) < B then low = mid else high = mid end
  end
  return low
end

local function pieces_of(models, i)
  local m = models[i]
  if type(m.pieces) ~= 'function' then
    error(('minmax: models[%d] has no pieces(); the LP methods need its linear pieces (use method = \'greedy\')')
          :format(i), 4)
  end
  return m:pieces()
end

-- The min-max program over the models' linear pieces: minimise T subject to
-- sum b = B, lo <= b <= cap, and T >= a*b_i + c for every piece of every worker. The
-- two forms differ only for a worker that may get no samples (lo = 0, a piece with
-- c > 0, so t_i(0) = 0 is not on that piece): the LP relaxation uses the weaker
-- constraint through the origin, a valid lower bound; the MILP (integer = true)
-- adds a 0/1 variable z_i that switches the intercept on when b_i > 0.
local function build(models, B, lo, cap, T0, integer)
  local lp = require 'lpsolve'
  local m = lp.model()
  local T = m:var { lo = T0, hi = huge, name = 'T' }
  local cols, ones = {}, {}
  for i = 1, #models do
    cols[i], ones[i] = m:var { lo = lo[i], hi = cap[i], int = integer }, 1
  end
  m:constraint(cols, ones, '==', B, 'global_batch')
  for i = 1, #models do
    local z
    for _, p in ipairs(pieces_of(models, i)) do
      if lo[i] >= 1 or p.c <= 0 then
        -- A flat piece is already below T's bound t_i(lo_i) >= c.
        if p.a > 0 then m:constraint({ cols[i], T }, { p.a, -1 }, '<=', -p.c) end
      elseif cap[i] > 0 and not integer then
        m:constraint({ cols[i], T }, { p.a + p.c / cap[i], -1 }, '<=', 0)
      elseif cap[i] > 0 then
        if not z then
          z = m:var { lo = 0, hi = 1, int = true }
          m:constraint({ cols[i], z }, { 1, -cap[i] }, '<=', 0)
          m:constraint({ cols[i], z }, { 1, -1 }, '>=', 0)
        end
        m:constraint({ cols[i], z, T }, { p.a, p.c, -1 }, '<=', 0)
      end
    end
  end
  m:objective({ T }, { 1 }, 'min')
  return m, cols
end

local function lp_bound(models, B, lo, cap, T0, opts)
  local m = build(models, B, lo, cap, T0, false)
  local r = m:solve { time_limit_s = opts.time_limit_s or 1.0 }
  m:free()
  return r
end

local function milp(models, B, lo, cap, T0, opts)
  local m, cols = build(models, B, lo, cap, T0, true)
  local r = m:solve { time_limit_s = opts.time_limit_s or 10.0 }
  m:free()
  if not r.ok then return nil, r end
  local b = {}
  for i = 1, #models do b[i] = floor(r.values[cols[i]] + 0.5) end
  return b, r
end

function M.solve(models, B, lo, hi, opts)
  opts = opts or {}
  local n, cap = prepare(models, B, lo, hi)
  if not n then return nil, cap end
  local method = opts.method or (n <= (opts.lp_max_workers or 256) and 'lp' or 'bisect')
  local T0 = lower_bound_from_minima(models, lo)
  local b, info
  if method == 'lp' then
    local r = lp_bound(models, B, lo, cap, T0, opts)
    local bound
    if r.ok then
      bound = r.objective - 1e-9 * math.abs(r.objective)
    else
      -- A failed LP costs time, not exactness: bisection supplies the bound.
      bound = bisect_bound(models, B, lo, cap, T0)
    end
    b = tight_start(models, B, lo, cap, bound)
    info = { method = 'lp', lower_bound = bound, status = r.status }
  elseif method == 'bisect' then
    local bound = bisect_bound(models, B, lo, cap, T0)
    b = tight_start(models, B, lo, cap, bound)
    info = { method = 'bisect', lower_bound = bound }
  elseif method == 'greedy' then
    b = {}
    for i = 1, n do b[i] = lo[i] end
    info = { method = 'greedy', lower_bound = T0 }
  elseif method == 'milp' then
    local r
    b, r = milp(models, B, lo, cap, T0, opts)
    if not b then
      return nil, ('minmax: lp_solve found no integer allocation (%s%s)'):format(r.status,
                                                                                r.message and (': ' .. r.message) or '')
    end
    info = { method = 'milp', lower_bound = T0, status = r.status }
  else
    error("minmax.solve: opts.method must be 'lp', 'bisect', 'milp' or 'greedy', got " .. tostring(method), 2)
  end
  info.steps = finish(models, B, lo, cap, b)
  return b, M.max_time(models, b), info
end

-- Every allocation, for tests: exponential in N; keep N and B small. Returns the
-- best batches (the first found among ties) and their max time.
function M.brute_force(models, B, lo, hi)
  local n, cap = prepare(models, B, lo, hi)
  if not n then return nil, cap end
  local best_T, best = huge, nil
  local b = {}
  local function walk(i, left, T)
    if T >= best_T then return end
    if i == n then
      if left < lo[n] or left > cap[n] then return end
      b[n] = left
      T = max(T, models[n]:predict(left))
      if T < best_T then best_T, best = T, { unpack(b) } end
      return
    end
    for x = lo[i], min(cap[i], left) do
      b[i] = x
      walk(i + 1, left - x, max(T, models[i]:predict(x)))
    end
  end
  walk(1, B, 0)
  return best, best_T
end

return M
