-- grouped: Basu et al., "Balancing stragglers against staleness in distributed deep
-- learning" (HiPC 2018). Workers of similar speed form a group; a group all-reduces
-- inside (synchronous, so its members should finish together) and pushes its summed
-- update to the parameter server asynchronously, so a slow group does not hold a
-- fast one back. Staleness is bounded by keeping the number of groups small: one
-- group is BSP, one worker a group is ASGD (asgd.lua).
--
-- Decisions, and the choices where the paper leaves room:
--   - speeds: each worker's samples per ms of compute, local_batch / compute_ms,
--     smoothed by an EWMA (tandem.predictor) over the observations;
--   - groups: workers sorted fastest first; a new group starts where the next
--     worker is slower than the current group's fastest by more than `threshold`
--     (speed < (1 - threshold) * fastest). More than `max_groups` groups: the two
--     adjacent groups whose mean speeds are closest merge, until few enough;
--   - no churn on noise: a new grouping (the first one too) is adopted only when it
--     has come out the same for `settle` observations in a row, and it only counts
--     as new when the groupings at threshold - margin and threshold + margin differ
--     from the one in force too (a worker whose speed sits at the boundary does not
--     flip-flop);
--   - batches: Basu et al. give each group its own mini-batch. Here the groups
--     share the global batch (sum b = B, so an epoch is the same number of samples
--     and sync_every keeps its meaning), each group's share proportional to the
--     group's total speed, so every group takes about the same time per update: a
--     group that took longer would fall behind by more versions (staler updates)
--     and, past the staleness bound, make the faster groups wait. Equal shares per
--     worker would make a 3x slower group 3x slower per update. Inside a group the
--     members' batches come from the min-max solve (tandem.minmax over per-worker
--     tandem.perf_model models, as lbb and boa), so they finish together;
--   - one group is plain BSP with min-max batches and is returned as mode 'bsp' (the
--     same mathematics, without a parameter server);
--   - batches are re-solved without regrouping when a new split predicts a max
--     compute time `min_gain` below the plan in force's (judged after the plan in
--     force has run `confirm` observations); a model that mispredicts its
--     worker by more than `model_change` for `confirm` observations in a row at
--     an unchanged batch is refit from those observations (a change of speed);
--   - a worker that has never run (no speed, no model) counts at the mean speed
--     until it has;
--   - an engine that reports no stats.mode knows only BSP: one group then.
-- Reasons name workers by rank (0-based, as the engine's logs do).
--
-- Parameters (cluster.params), with defaults:
--   threshold = 0.3        relative speed gap that starts a new group
--   margin = 0.05          hysteresis around threshold (see above)
--   staleness = 1          S, server versions a computing group's weights may fall
--                          behind before faster groups wait
--   max_groups = S + 1     most groups (Basu et al. bound staleness by the number of
--                          groups: with G groups updating at the same pace a group's
--                          update is about G - 1 versions old)
--   settle = 3             observations a new grouping must persist before adoption
--   sync_every = 10        global batches' worth of server updates between meetings
--   alpha = 0.5            EWMA weight of the newest speed
--   min_gain = 0.05        re-solve the batches only for this much less max time
--   model_change = 0.15, confirm = 2   model refit rule (above)
--   window = 20            observations per linear model
--   profile                warm-up profiles, as lbb and boa take them
--   allow_drop = false     let the solve give a worker 0 samples (when min_batch is 0)
--   solver                 tandem.minmax method (default: its own choice)
--
-- State: everything step() learns lives in one table, `state`, which save() returns
-- as it is and restore() takes back whole (from another policy: its models, when it
-- saved one per worker, as lbb and boa do). Its models, speeds and the plan tracker
-- are plain data (their methods live in their modules), so the copy restore() gets
-- needs only its models and speeds given their methods back.
local util = require 'tandem.policy_util'
local sync_plan = require 'tandem.sync_plan'
local minmax = require 'tandem.minmax'
local predictor = require 'tandem.predictor'

local WHO = 'grouped'
local WAIT = 4 -- observations a returned plan gets to show up before it is given up

local policy = {}
local C, cfg, lo -- the cluster, the parameters, the solve's minima: fixed by init()
-- state = {
--   policy = 'grouped',
--   speeds, models       per worker: EWMA of samples/ms, time model (tandem.perf_model)
--   stale, stale_ms, prev_batch   per worker: mispredictions in a row at an unchanged
--                        batch, their summed ms, the batch last seen (policy_util.observe_model)
--   last_seen            the newest iteration observed
--   adopted              group of each worker (1 = fastest), nil before the first grouping
--   basis                speeds when `adopted` was adopted
--   candidate, seen_count   the different grouping seen in a row, and how many times
--   why_regroup          reason of an adoption not yet turned into a plan
--   track                the plan tracker: current, run, pending, waited
-- }
local state

local function int_param(p, key, default, min, max) return util.int_param(p, key, default, min, max, WHO) end

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  local p = C.params
  local staleness = int_param(p, 'staleness', 1, 0)
  cfg = {
    threshold = util.param(p, 'threshold', 0.3, 0, 0.99, WHO),
    margin = util.param(p, 'margin', 0.05, 0, 0.5, WHO),
    staleness = staleness,
    max_groups = int_param(p, 'max_groups', staleness + 1, 1),
    settle = int_param(p, 'settle', 3, 1),
    sync_every = int_param(p, 'sync_every', 10, 1),
    alpha = util.param(p, 'alpha', 0.5, 0.01, 1, WHO),
    min_gain = util.param(p, 'min_gain', 0.05, 0, 1, WHO),
    model_change = util.param(p, 'model_change', 0.15, 0, nil, WHO),
    confirm = int_param(p, 'confirm', 2, 1),
    window = int_param(p, 'window', 20, 1),
    solver = util.solver(p, WHO),
  }
  lo = util.solve_minima(C, WHO)
  state = { policy = WHO, models = util.time_models(C, cfg.window, WHO), speeds = {}, stale = {}, stale_ms = {},
            prev_batch = {}, seen_count = 0, track = { run = 0, waited = 0 } }
  for i = 1, C.workers do
    state.speeds[i] = predictor.ewma { alpha = cfg.alpha }
    state.stale[i], state.stale_ms[i], state.prev_batch[i] = 0, 0, 0
  end
end

---------------------------------------------------------------------------------
-- What is in force, as a signature 'mode|groups|batches' (groups renumbered by
-- first appearance, so two numberings of one grouping compare equal).

local canonical, signature, stats_groups = sync_plan.canonical, sync_plan.signature, sync_plan.stats_groups
local stats_signature = sync_plan.stats_signature
-- 'applied' when the pending plan shows up, 'given_up' when it waited too long.
local function track_update(sig) return sync_plan.track_update(state.track, sig, WAIT) end

---------------------------------------------------------------------------------
-- Observations: speeds and models.

local function observe(entry)
  for i = 1, C.workers do
    local w = entry.workers[i]
    local b, ms = w.local_batch or 0, w.compute_ms or 0
    if b > 0 and ms > 0 then state.speeds[i]:observe(b / ms) end
    util.observe_model(state.models[i], state, i, b, ms, cfg.model_change)
  end
end

-- Refits the models that mispredicted `confirm` times in a row; true if any.
local function refit_stale()
  local any = false
  for i = 1, C.workers do
    if state.stale[i] >= cfg.confirm then
      state.models[i]:refit_latest(state.prev_batch[i], state.stale_ms[i] / state.stale[i])
      state.stale[i], state.stale_ms[i] = 0, 0
      any = true
    end
  end
  return any
end

-- Each worker's smoothed speed (samples/ms), the mean for one never measured; nil
-- when none has been.
local function current_speeds()
  local s, sum, known = {}, 0, 0
  for i = 1, C.workers do
    s[i] = state.speeds[i]:predict()
    if s[i] then sum, known = sum + s[i], known + 1 end
  end
  if known == 0 then return nil end
  for i = 1, C.workers do s[i] = s[i] or sum / known end
  return s
end

---------------------------------------------------------------------------------
-- Grouping.

-- Worker indices sorted fastest first (ties by index).
local function by_speed(s)
  local order = {}
  for i = 1, #s do order[i] = i end
  table.sort(order, function(a, b)
    if s[a] ~= s[b] then return s[a] > s[b] end
    return a < b
  end)
  return order
end

-- The group of each worker (1 = fastest) for threshold thr, at most maxg groups.
local function partition(s, order, thr, maxg)
  local groups, cur, top = {}, nil, nil
  for _, i in ipairs(order) do
    if not cur or s[i] < (1 - thr) * top then
      cur = { members = {}, sum = 0 }
      groups[#groups + 1] = cur
      top = s[i]
    end
    cur.members[#cur.members + 1] = i
    cur.sum = cur.sum + s[i]
  end
  while #groups > maxg do
    -- Merge the adjacent pair whose mean speeds are closest (ratio nearest 1).
    local best, at
    for j = 1, #groups - 1 do
      local a, b = groups[j], groups[j + 1]
      local r = (a.sum / #a.members) / (b.sum / #b.members)
      if not best or r < best then best, at = r, j end
    end
    local a, b = groups[at], groups[at + 1]
    for _, i in ipairs(b.members) do a.members[#a.members + 1] = i end
    a.sum = a.sum + b.sum
    table.remove(groups, at + 1)
  end
  local assign = {}
  for g, grp in ipairs(groups) do
    for _, i in ipairs(grp.members) do assign[i] = g end
  end
  return assign, #groups
end

local function same_grouping(a, b) return a ~= nil and b ~= nil and util.same(canonical(a), canonical(b)) end

local function count_groups(assign)
  local g = 0
  for i = 1, #assign do g = math.max(g, assign[i]) end
  return g
end

local function ranks(list)
  local out = {}
  for k = 1, math.min(#list, 8) do out[k] = tostring(list[k] - 1) end
  if #list > 8 then out[#out + 1] = ('... (%d)'):format(#list) end
  return '[' .. table.concat(out, ',') .. ']'
end

-- The worker whose speed changed most since `basis`, as words.
local function biggest_change(s)
  if not state.basis then return 'first grouping from measured speeds' end
  local who, ratio, dev = nil, 1, 0
  for i = 1, C.workers do
    if state.basis[i] and state.basis[i] > 0 and s[i] > 0 then
      local r = s[i] / state.basis[i]
      local d = math.abs(math.log(r))
      if d > dev then who, ratio, dev = i, r, d end
    end
  end
  if not who then return 'the speed picture changed' end
  if ratio < 1 then return ('rank %d slowed %.1fx'):format(who - 1, 1 / ratio) end
  return ('rank %d sped up %.1fx'):format(who - 1, ratio)
end

-- Counts a grouping different from the adopted one; adopts it after `settle`
-- observations in a row.
local function regroup(s, maxg)
  local order = by_speed(s)
  local cand = partition(s, order, cfg.threshold, maxg)
  if state.adopted then
    local unchanged = same_grouping(cand, state.adopted)
    if not unchanged and cfg.margin > 0 then
      unchanged = same_grouping(partition(s, order, math.max(0, cfg.threshold - cfg.margin), maxg), state.adopted)
                  or same_grouping(partition(s, order, math.min(0.99, cfg.threshold + cfg.margin), maxg), state.adopted)
    end
    if unchanged then
      state.candidate, state.seen_count = nil, 0
      return
    end
  end
  if state.candidate and same_grouping(cand, state.candidate) then
    state.seen_count = state.seen_count + 1
  else
    state.candidate, state.seen_count = cand, 1
  end
  if state.seen_count >= cfg.settle then
    state.why_regroup = state.adopted and ('regrouped because ' .. biggest_change(s))
                        or 'first grouping from measured speeds'
    state.adopted, state.candidate, state.seen_count = cand, nil, 0
    state.basis = {}
    for i = 1, C.workers do state.basis[i] = s[i] end
  end
end

---------------------------------------------------------------------------------
-- Batches.

-- Integer shares proportional to the weights w, within [lo, hi], summing to B.
local split = util.proportional_split

-- Plan for grouping `assign` (G groups): group shares proportional to the groups'
-- total speeds, min-max inside each group. Returns batches, each group's members
-- and predicted time (ms per update), or raises.
local function build(assign, s)
  local G = count_groups(assign)
  local members = {}
  for g = 1, G do members[g] = {} end
  for i = 1, C.workers do
    local m = members[assign[i]]
    m[#m + 1] = i
  end
  local share
  if G == 1 then
    share = { C.global_batch }
  else
    local w, glo, ghi = {}, {}, {}
    for g = 1, G do
      w[g], glo[g], ghi[g] = 0, 0, 0
      for _, i in ipairs(members[g]) do
        w[g], glo[g], ghi[g] = w[g] + s[i], glo[g] + lo[i], ghi[g] + C.max_batch[i]
      end
      glo[g] = math.max(glo[g], 1) -- a group without samples carries nothing
    end
    local sum_lo, sum_hi = 0, 0
    for g = 1, G do sum_lo, sum_hi = sum_lo + glo[g], sum_hi + ghi[g] end
    if sum_lo > C.global_batch or sum_hi < C.global_batch then
      error(('%s: cannot give each of %d groups samples within the bounds (global batch %d, minima %d, maxima %d)')
            :format(WHO, G, C.global_batch, sum_lo, sum_hi), 3)
    end
    share = split(w, C.global_batch, glo, ghi)
  end
  local plan, times = {}, {}
  for g = 1, G do
    local ms, glo, ghi = {}, {}, {}
    for k, i in ipairs(members[g]) do ms[k], glo[k], ghi[k] = state.models[i], lo[i], C.max_batch[i] end
    local sub, t = minmax.solve(ms, share[g], glo, ghi, { method = cfg.solver })
    if not sub then error(WHO .. ': ' .. t, 3) end
    for k, i in ipairs(members[g]) do plan[i] = sub[k] end
    times[g] = t
  end
  return plan, members, times
end

-- A worker whose model has no observation (it never ran) gets one at the mean
-- speed, so the solve can give it a batch and measure it.
local function seed_models(s)
  local b = math.max(1, math.floor(C.global_batch / C.workers))
  for i = 1, C.workers do
    if not state.models[i]:ready() then state.models[i]:observe(b, b / s[i]) end
  end
end

function policy.step(stats)
  local modes = stats.mode ~= nil
  state.last_seen = util.each_new(stats, state.last_seen, observe)
  local current = util.batches(stats.workers)
  track_update(stats_signature(stats))
  refit_stale()
  local s = current_speeds()
  if not s then return nil end
  regroup(s, modes and cfg.max_groups or 1)
  if not state.adopted or state.track.pending then return nil end
  seed_models(s)
  local plan, members, times = build(state.adopted, s)
  local G = #members
  local mode = G > 1 and 'grouped' or 'bsp'
  local sig = signature(mode, state.adopted, plan)
  if sig == state.track.current then
    state.why_regroup = nil
    return nil
  end
  local in_force_mode = stats.mode or 'bsp'
  local grouping_differs = in_force_mode ~= mode
                           or (mode == 'grouped' and not same_grouping(stats_groups(stats.workers), state.adopted))
  local before = minmax.max_time(state.models, current)
  local after = 0
  for g = 1, G do after = math.max(after, times[g]) end
  local why
  if grouping_differs then
    why = state.why_regroup or 'the grouping in force differs'
  else
    -- An adoption that leaves the grouping in force as it is (the first grouping of
    -- a bsp cluster into one group) is no reason for a plan by itself.
    state.why_regroup = nil
    if state.track.run < cfg.confirm then return nil end
    if after > (1 - cfg.min_gain) * before then return nil end
    why = 'rebalanced'
  end
  state.why_regroup = nil
  state.track.pending, state.track.waited = sig, 0
  local answer = { local_batch = plan, mode = mode }
  if G == 1 then
    local slow, fast = math.huge, 0
    for i = 1, C.workers do slow, fast = math.min(slow, s[i]), math.max(fast, s[i]) end
    answer.reason = ('1 group: bsp with min-max batches, speeds %.0f to %.0f samples/s; %s; '
                     .. 'predicted max compute %.1f ms (plan in force %.1f ms)')
                    :format(1000 * slow, 1000 * fast, why, after, before)
    return answer
  end
  local parts = {}
  for g = 1, G do
    local sum, batch = 0, 0
    for _, i in ipairs(members[g]) do sum, batch = sum + s[i], batch + plan[i] end
    parts[g] = ('%s at ~%.0f samples/s each, batch %d, %.1f ms an update')
               :format(ranks(members[g]), 1000 * sum / #members[g], batch, times[g])
  end
  answer.groups = {}
  for i = 1, C.workers do answer.groups[i] = state.adopted[i] end
  answer.staleness = cfg.staleness
  answer.sync_every = cfg.sync_every
  answer.reason = ('%d groups: %s; %s; staleness %d, meeting every %d global batches')
                  :format(G, table.concat(parts, '; '), why, cfg.staleness, cfg.sync_every)
  return answer
end

function policy.save() return state end

function policy.restore(saved)
  local whole
  state, whole = util.restore_models(state, saved, WHO, C.workers)
  if whole then
    for i = 1, C.workers do state.speeds[i] = predictor.load(state.speeds[i]) end
  end
end

return policy
