-- star: STAR, straggler-tolerant and resilient training on homogeneous GPUs. Even
-- identical GPUs straggle (CPU and bandwidth contention), and switching to ASGD is
-- no cure. STAR picks a synchronisation mode for the straggler picture from
-- predicted iteration times and a statistical-efficiency model, and switches only
-- when the picture changes. The modes here: bsp; ksync (the server steps once the
-- first k of N gradients are in, the rest are dropped); grouped (the stragglers in
-- a group of their own: synchronous inside, asynchronous across).
--
-- Per observation:
--   - each worker's predicted iteration time at batch b, t_i(b) = c_i b + o_i: c_i an
--     EWMA of compute_ms per sample, o_i an EWMA of data_ms + comm_ms (the parts that
--     do not grow with the batch). STAR predicts with an LSTM over CPU and bandwidth
--     availability; the engine reports neither, so an EWMA of what it does report;
--   - stragglers: workers whose predicted time at their equal share is more than
--     straggler_factor times the median's, both by the EWMA and by the latest
--     observation alone (a one-off spike lifts the EWMA for a few observations; the
--     latest observation clears it at once). A worker in the set in force stays a
--     straggler down to straggler_factor * (1 - margin), so one near the factor does
--     not flip the picture back and forth. The median is the lower median (the
--     faster middle value for even N): with two workers the faster is the
--     reference. STAR's own rule, (t - t_min) / t_min > 0.2, is a factor of 1.2
--     against the fastest;
--   - the gradient noise scale B_noise (McCandlish et al. 2018, "An Empirical Model
--     of Large-Batch Training", appendix A, two batch sizes), from bsp observations
--     only: B_small = B / n (n workers with samples), |G_small|^2 = the batch-weighted
--     mean of the workers' grad_sq (expected value |G|^2 + tr(Sigma) / B_small exactly,
--     for uneven batches too), B_big = B, |G_big|^2 = global_grad_sq;
--       |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
--       tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)
--     Each is smoothed by its own EWMA, and B_noise = tr(Sigma) / |G|^2 is taken of the
--     smoothed values (McCandlish et al.: the ratio of single noisy estimates is
--     biased), clamped to [1e-6 B, 1e6 B] (a non-positive |G|^2 means the noise
--     dominates: the upper end). Before any estimate: params.b_noise. (The
--     estimator is tandem.noise_scale, shared with goodput.)
--   - the server's time per update (server_busy_ms / updates), an EWMA, added to
--     the update time of ksync and grouped: STAR's warning that asynchronous modes
--     load the CPU and network, as far as the engine measures it.
--
-- Progress rate of a mode, per second: the sum over its updates of eff(the
-- update's batch), eff(b) = 1 / (1 + B_noise / b) (McCandlish et al.: the steps needed
-- grow as 1 + B_noise / b, so a step of b samples is worth eff(b) of an ideal one):
--   bsp      one update of B per max_i t_i(b_i);
--   ksync    k = N - #stragglers: one update of the k fastest workers' samples per
--            k-th fastest time + the server's time;
--   grouped  the fast group and the straggler group update at their own pace, each
--            update worth eff(group batch) * (1 - staleness_penalty * its expected
--            staleness), that staleness being the other groups' updates while it
--            computes; groups more than S versions ahead of the slowest would wait,
--            so their rate is capped there. S = params.staleness, by default the
--            versions the fast group makes during one straggler update (so it never
--            waits), at least 1.
-- Dropping a worker's samples (ksync) costs little when B >> B_noise (eff barely
-- moves) and a fraction of the progress when B << B_noise; the model weighs that
-- against the time saved, so there is no separate test of B_noise against B.
--
-- Decisions: nothing until a straggler set has been seen `settle` observations in
-- a row. No stragglers: bsp. Otherwise the mode with the highest predicted rate
-- among bsp, ksync (only for at most max_drop stragglers) and grouped. Switching:
-- when the straggler set in force changes (a new set seen `settle` observations in
-- a row) the best mode for it is taken; in between, another mode is taken only if
-- it predicts more than min_gain more progress than the plan in force. A segment in
-- another mode still reports every worker's times, so a straggler that recovers
-- under ksync is seen and bsp comes back.
-- Batches: bsp's are equal (STAR targets homogeneous GPUs), or with balance = true
-- proportional to the workers' predicted compute speeds (LB-BSP); ksync and grouped
-- keep equal batches (ksync drops the stragglers' work anyway; grouped exists so
-- that stragglers need not be balanced). An engine that reports no stats.mode knows
-- only bsp: star then stays there.
-- Reasons name workers by rank (0-based, as the engine's logs do).
--
-- Parameters (cluster.params), with defaults:
--   straggler_factor = 1.5    slower than this times the median: a straggler
--   max_drop = 1              most stragglers ksync may leave out of an update
--   staleness_penalty = 0.1   progress lost per version of expected staleness
--   staleness                 grouped: the staleness bound S (default: see above)
--   min_gain = 0.1            relative gain that justifies a switch without a new
--                             straggler picture
--   margin = 0.1              a straggler stays one until it is below
--                             straggler_factor * (1 - margin) (hysteresis)
--   settle = 2                observations a new straggler set must persist
--   sync_every = 10           ksync, grouped: global batches between meetings
--   alpha = 0.5               EWMA weight of the newest time
--   noise_alpha = 0.1         EWMA weight of the newest |G|^2 and tr(Sigma) estimates
--   b_noise = B               B_noise until the first estimate
--   balance = false           bsp batches proportional to speed instead of equal
--
-- State: everything step() learns lives in one table, `state`, which save() returns
-- as it is and restore() takes back whole (from star only: no other policy keeps
-- these estimates). Its predictors are plain data (their methods live in
-- tandem.predictor), so the copy restore() gets needs only them given their
-- methods back.
local util = require 'tandem.policy_util'
local sync_plan = require 'tandem.sync_plan'
local predictor = require 'tandem.predictor'
local noise_scale = require 'tandem.noise_scale'

local WHO = 'star'
local WAIT = 4 -- observations a returned plan gets to show up before it is given up

local policy = {}
local C, cfg, lo, equal -- the cluster, the parameters, the solve's minima, the equal split: fixed by init()
-- state = {
--   policy = 'star',
--   per_sample, overhead   per worker: EWMA of compute_ms per sample, of data_ms + comm_ms
--   last_seen              the newest iteration observed
--   noise                  the B_noise estimator (tandem.noise_scale): smoothed |G|^2 and tr(Sigma)
--   server_ms              EWMA of the server's time per update (ms), nil before measured
--   adopted                sorted straggler set in force (worker indices); nil until the first is confirmed
--   candidate, seen_count  the different straggler set seen in a row, and how many times
--   redecide               the straggler set changed (or first call): choose afresh
--   choice                 what this policy put in force: { mode, k, groups, staleness }
--   track                  the plan tracker: current, run, pending, waited
-- }
local state

local function int_param(p, key, default, min, max) return util.int_param(p, key, default, min, max, WHO) end

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  local p = C.params
  if p.balance ~= nil and type(p.balance) ~= 'boolean' then
    error(WHO .. ': params.balance must be true or false, got ' .. tostring(p.balance), 2)
  end
  cfg = {
    straggler_factor = util.param(p, 'straggler_factor', 1.5, 1, nil, WHO),
    max_drop = int_param(p, 'max_drop', 1, 0),
    staleness_penalty = util.param(p, 'staleness_penalty', 0.1, 0, nil, WHO),
    staleness = int_param(p, 'staleness', nil, 0),
    min_gain = util.param(p, 'min_gain', 0.1, 0, nil, WHO),
    margin = util.param(p, 'margin', 0.1, 0, 0.5, WHO),
    settle = int_param(p, 'settle', 2, 1),
    sync_every = int_param(p, 'sync_every', 10, 1),
    alpha = util.param(p, 'alpha', 0.5, 0.01, 1, WHO),
    noise_alpha = util.param(p, 'noise_alpha', 0.1, 0.01, 1, WHO),
    b_noise = util.param(p, 'b_noise', C.global_batch, 0, nil, WHO),
    balance = p.balance == true,
  }
  lo = util.solve_minima(C, WHO)
  equal = util.equal_split(C.global_batch, lo, C.max_batch)
  state = { policy = WHO, per_sample = {}, overhead = {}, noise = noise_scale.new { alpha = cfg.noise_alpha },
            seen_count = 0, redecide = true, track = { run = 0, waited = 0 } }
  for i = 1, C.workers do
    state.per_sample[i] = predictor.ewma { alpha = cfg.alpha }
    state.overhead[i] = predictor.ewma { alpha = cfg.alpha }
  end
end

---------------------------------------------------------------------------------
-- What is in force, as a signature (as in grouped.lua).

local canonical, signature, stats_groups = sync_plan.canonical, sync_plan.signature, sync_plan.stats_groups
local stats_signature = sync_plan.stats_signature
-- 'applied' when the pending plan shows up, 'given_up' when it waited too long.
local function track_update(sig) return sync_plan.track_update(state.track, sig, WAIT) end

---------------------------------------------------------------------------------
-- Estimates.

local function observe(entry)
  local workers = entry.workers
  for i = 1, C.workers do
    local w = workers[i]
    local b, ms = w.local_batch or 0, w.compute_ms or 0
    if b > 0 and ms > 0 then
      state.per_sample[i]:observe(ms / b)
      state.overhead[i]:observe((w.data_ms or 0) + (w.comm_ms or 0))
    end
  end
end

local function ewma(old, x, a) return old and (a * x + (1 - a) * old) or x end

-- The smoothed B_noise (params.b_noise before any estimate).
local function b_noise() return state.noise:b_noise(C.global_batch, cfg.b_noise) end

local function observe_server(stats)
  local updates, busy = stats.updates, stats.server_busy_ms
  if type(updates) == 'number' and updates > 0 and type(busy) == 'number' and busy >= 0 then
    state.server_ms = ewma(state.server_ms, busy / updates, cfg.alpha)
  end
end

-- Predicted time of worker i for b samples; nil before it has run.
local function predict(i, b)
  local c, o = state.per_sample[i]:predict(), state.overhead[i]:predict()
  if not c then return nil end
  return c * b + o
end

-- The lower median of a list of numbers.
local function lower_median(xs)
  local s = {}
  for k = 1, #xs do s[k] = xs[k] end
  table.sort(s)
  return s[math.floor((#s + 1) / 2)]
end

-- The straggler set of this observation (sorted worker indices), and each
-- worker's predicted time at its equal share.
local function stragglers_now(latest)
  local n = C.workers
  local t, tl, mean, known = {}, {}, 0, 0
  for i = 1, n do
    t[i] = predict(i, equal[i])
    if t[i] then mean, known = mean + t[i], known + 1 end
  end
  if known == 0 then return nil end
  for i = 1, n do t[i] = t[i] or mean / known end -- never measured: an average worker
  for i = 1, n do
    local w = latest[i]
    local b, ms = w.local_batch or 0, w.compute_ms or 0
    tl[i] = (b > 0 and ms > 0) and (ms / b * equal[i] + (w.data_ms or 0) + (w.comm_ms or 0)) or t[i]
  end
  local mt, ml = lower_median(t), lower_median(tl)
  local set, was = {}, {}
  for _, i in ipairs(state.adopted or {}) do was[i] = true end
  for i = 1, n do
    local f = was[i] and cfg.straggler_factor * (1 - cfg.margin) or cfg.straggler_factor
    if t[i] > f * mt and tl[i] > f * ml then set[#set + 1] = i end
  end
  return set, t, mt
end

---------------------------------------------------------------------------------
-- The progress model.

local function eff(b, bn) return b > 0 and b / (b + bn) or 0 end

-- Each worker's predicted time for the batches `b` (never measured: the mean).
local function times(b)
  local t, sum, known = {}, 0, 0
  for i = 1, C.workers do
    t[i] = predict(i, b[i])
    if t[i] then sum, known = sum + t[i], known + 1 end
  end
  for i = 1, C.workers do t[i] = t[i] or sum / known end
  return t
end

local function rate_bsp(b, bn)
  local t, T = times(b), 0
  for i = 1, C.workers do if b[i] > 0 then T = math.max(T, t[i]) end end
  return 1000 * eff(C.global_batch, bn) / T, T
end

local function rate_ksync(k, b, bn)
  local t, order = times(b), {}
  for i = 1, C.workers do order[i] = i end
  table.sort(order, function(x, y)
    if t[x] ~= t[y] then return t[x] < t[y] end
    return x < y
  end)
  local batch = 0
  for r = 1, k do batch = batch + b[order[r]] end
  local T = t[order[k]] + (state.server_ms or 0)
  return 1000 * eff(batch, bn) / T, T
end

-- Groups as an array of member lists, from a group number per worker.
local function members_of(groups)
  local m, G = {}, 0
  for i = 1, #groups do
    local g = groups[i]
    G = math.max(G, g)
    m[g] = m[g] or {}
    m[g][#m[g] + 1] = i
  end
  for g = 1, G do m[g] = m[g] or {} end
  return m, G
end

-- The default staleness bound for a grouping: the versions the other groups make
-- while the slowest computes one update (so nobody waits), at least 1.
local function auto_staleness(groups, b)
  local t = times(b)
  local m, G = members_of(groups)
  local T, u, slowest = {}, 0, 1
  for g = 1, G do
    T[g] = 0
    for _, i in ipairs(m[g]) do T[g] = math.max(T[g], t[i]) end
    if T[g] > T[slowest] then slowest = g end
  end
  for g = 1, G do if g ~= slowest and T[g] > 0 then u = u + 1 / T[g] end end
  return math.max(1, math.ceil(T[slowest] * u - 1e-9))
end

local function rate_grouped(groups, b, S, bn)
  local t = times(b)
  local m, G = members_of(groups)
  local T, B, u, slowest = {}, {}, {}, 1
  local srv = state.server_ms or 0
  for g = 1, G do
    T[g], B[g] = 0, 0
    for _, i in ipairs(m[g]) do T[g], B[g] = math.max(T[g], t[i]), B[g] + b[i] end
    T[g] = T[g] + srv
    u[g] = 1 / T[g]
    if T[g] > T[slowest] then slowest = g end
  end
  -- Versions the others make during one update of the slowest group; past S they wait.
  local others = 0
  for g = 1, G do if g ~= slowest then others = others + u[g] end end
  local V = T[slowest] * others
  if S and V > S and V > 0 then
    for g = 1, G do if g ~= slowest then u[g] = u[g] * S / V end end
  end
  local total, usum = 0, 0
  for g = 1, G do usum = usum + u[g] end
  for g = 1, G do
    local stale = T[g] * (usum - u[g])
    total = total + u[g] * eff(B[g], bn) * math.max(0, 1 - cfg.staleness_penalty * stale)
  end
  return 1000 * total, T[1]
end

-- Integer shares proportional to the weights w, within [lo, hi], summing to B.
local split = util.proportional_split

local function balanced()
  local w = {}
  for i = 1, C.workers do
    local c = state.per_sample[i]:predict()
    w[i] = c and 1 / c or nil
  end
  local sum, known = 0, 0
  for i = 1, C.workers do if w[i] then sum, known = sum + w[i], known + 1 end end
  for i = 1, C.workers do w[i] = w[i] or sum / known end
  return split(w, C.global_batch, lo, C.max_batch)
end

local function describe(c)
  if c.mode == 'ksync' then return ('ksync k=%d'):format(c.k) end
  if c.mode == 'grouped' then return ('grouped S=%d'):format(c.staleness) end
  return c.mode
end

local function all_positive(b)
  for i = 1, #b do if b[i] <= 0 then return false end end
  return true
end

-- The candidate modes for straggler set `set`, each { mode, k, groups, staleness,
-- batches, rate }, best first (ties: bsp before ksync before grouped).
local function candidates(set, bn)
  local n, s = C.workers, #set
  local list = {}
  local bsp_batches = cfg.balance and balanced() or equal
  list[1] = { mode = 'bsp', batches = bsp_batches, rate = rate_bsp(bsp_batches, bn) }
  if s >= 1 and s < n then
    if s <= cfg.max_drop and all_positive(equal) then
      local k = n - s
      list[#list + 1] = { mode = 'ksync', k = k, batches = equal, rate = rate_ksync(k, equal, bn) }
    end
    local groups, slow = {}, {}
    for _, i in ipairs(set) do slow[i] = true end
    for i = 1, n do groups[i] = slow[i] and 2 or 1 end
    local S = cfg.staleness or auto_staleness(groups, equal)
    list[#list + 1] = { mode = 'grouped', groups = groups, staleness = S, batches = equal,
                        rate = rate_grouped(groups, equal, S, bn) }
  end
  local best = 1
  for k = 2, #list do if list[k].rate > list[best].rate then best = k end end
  return list, best
end

-- The rate of the plan in force (what this policy put there, else what the stats
-- show; a ksync whose k is unknown is taken as N - #stragglers).
local function rate_in_force(stats, bn)
  local mode = stats.mode or 'bsp'
  local b = util.batches(stats.workers)
  local choice = state.choice
  if mode == 'ksync' then
    local k = (choice and choice.mode == 'ksync' and choice.k) or math.max(1, C.workers - #(state.adopted or {}))
    return (rate_ksync(k, b, bn))
  elseif mode == 'grouped' then
    local groups = canonical(stats_groups(stats.workers))
    local S = (choice and choice.mode == 'grouped' and choice.staleness) or cfg.staleness
              or auto_staleness(groups, b)
    return (rate_grouped(groups, b, S, bn))
  end
  return (rate_bsp(b, bn))
end

local function same_set(a, b) return util.same(a, b) end

function policy.step(stats)
  state.last_seen = util.each_new(stats, state.last_seen, observe)
  state.noise:observe(stats)
  observe_server(stats)
  track_update(signature(stats.mode or 'bsp', stats_groups(stats.workers), util.batches(stats.workers)))
  local set, t, median = stragglers_now(stats.workers)
  if not set then return nil end
  if state.adopted and same_set(set, state.adopted) then
    state.candidate, state.seen_count = nil, 0
  else
    if state.candidate and same_set(set, state.candidate) then
      state.seen_count = state.seen_count + 1
    else
      state.candidate, state.seen_count = set, 1
    end
    if state.seen_count >= cfg.settle then
      state.adopted, state.candidate, state.seen_count, state.redecide = set, nil, 0, true
    end
  end
  if not state.adopted or state.track.pending then return nil end
  -- An engine without modes (no stats.mode) runs bsp whatever the plan says.
  local modes = stats.mode ~= nil
  local bn = b_noise()
  local list, best = candidates(modes and state.adopted or {}, bn)
  local pick = list[best]
  local sig = signature(pick.mode, pick.groups, pick.batches)
  local now = rate_in_force(stats, bn)
  local why
  if state.redecide then
    why = #state.adopted > 0 and 'straggler picture changed' or 'no stragglers'
  elseif pick.rate > (1 + cfg.min_gain) * now then
    why = ('%.0f%% more predicted progress than the plan in force'):format(100 * (pick.rate / now - 1))
  end
  state.redecide = false
  -- The signature does not show k or S: those are known from what this policy chose.
  local choice = state.choice
  local in_force = sig == state.track.current
                   and (pick.mode == 'bsp' or (choice ~= nil and choice.mode == pick.mode and choice.k == pick.k
                                               and choice.staleness == pick.staleness))
  if in_force or not why then return nil end
  state.choice = { mode = pick.mode, k = pick.k, groups = pick.groups, staleness = pick.staleness }
  state.track.pending, state.track.waited = sig, 0
  local rates = {}
  for k = 1, #list do rates[k] = ('%s %.3g'):format(describe(list[k]), list[k].rate) end
  local slow = {}
  for k, i in ipairs(state.adopted) do slow[k] = ('rank %d at %.1fx'):format(i - 1, t[i] / median) end
  local plan = { local_batch = pick.batches, mode = pick.mode,
                 reason = ('%s: %s; stragglers (time / median): %s; B_noise ~%.3g (B = %d%s); predicted progress/s: %s (in force %.3g)')
                          :format(describe(pick), why, #slow > 0 and table.concat(slow, ', ') or 'none', bn,
                                  C.global_batch, state.noise.g2 and '' or ', prior', table.concat(rates, ', '), now) }
  if pick.mode == 'ksync' then
    plan.k, plan.sync_every = pick.k, cfg.sync_every
  elseif pick.mode == 'grouped' then
    plan.groups, plan.staleness, plan.sync_every = {}, pick.staleness, cfg.sync_every
    for i = 1, C.workers do plan.groups[i] = pick.groups[i] end
  end
  local copy = {}
  for i = 1, C.workers do copy[i] = plan.local_batch[i] end
  plan.local_batch = copy
  return plan
end

function policy.save() return state end

function policy.restore(saved)
  if type(saved) ~= 'table' or saved.policy ~= WHO or type(saved.per_sample) ~= 'table'
     or #saved.per_sample ~= C.workers then
    return
  end
  state = saved
  for i = 1, C.workers do
    state.per_sample[i], state.overhead[i] = predictor.load(state.per_sample[i]), predictor.load(state.overhead[i])
  end
  state.noise = noise_scale.load(state.noise or {}, cfg.noise_alpha)
end

return policy
