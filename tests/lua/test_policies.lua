-- The policies in scripts/policies/, driven by a cluster simulated in Lua (no
-- engine): worker i computes b samples in b / speed_i * k + fixed ms (times a small
-- deterministic noise), the stats follow the policy protocol, and a returned plan
-- applies `lag` iterations later, as in the engine. Checked: every plan is valid;
-- equal gives the equal split; proportional, boa and lbb get within 5% of the best
-- achievable max compute time; lbb recovers within 10% in 5 iterations of a
-- slowdown and of the recovery; save()/restore() carries a policy's state into a
-- fresh instance; at 1024 workers every policy decides valid plans (what that costs:
-- tools/bench/policy_bench.cpp).
local T = require 'tandem.testing'
local pm = require 'tandem.perf_model'
local minmax = require 'tandem.minmax'
local util = require 'tandem.policy_util'

local fixtures = require 'tests.lua.policy_fixtures'
local load_policy = fixtures.load_policy

local noise = fixtures.noise

local function equal_batches(B, n)
  local lo, hi = {}, {}
  for i = 1, n do lo[i], hi[i] = 0, B end
  return util.equal_split(B, lo, hi)
end

-- A simulated cluster. opts: speeds, B, k (ms per sample at speed 1), fixed (ms),
-- noise (relative), lag, lo, hi (default 0 and B), params, speed_at(i, t, base)
-- (optional schedule), window (history length), initial (batches at iteration 0;
-- default the equal split). trace[t] holds the batches in force at iteration t.
local Sim = {}
Sim.__index = Sim

local function new_sim(opts)
  local s = setmetatable(fixtures.sim_fields(opts), Sim)
  s.batches = opts.initial or equal_batches(s.B, s.n)
  s.micro = {}  -- the micro-batches in force (none: 1 each)
  s.local_max = {}  -- a worker's cap bounds its micro-batch; its local batch may be 1024 of them
  for i = 1, s.n do s.local_max[i] = s.hi[i] * util.MAX_MICRO end
  s.micro_trace = {}
  return s
end

Sim.speed = fixtures.sim_speed

-- The true (noise-free) time models at iteration t, as perf_model.linear tables.
function Sim:true_models(t)
  local models = {}
  for i = 1, self.n do
    local m = pm.linear()
    m.a, m.c = self.k / self:speed(i, t), self.fixed
    models[i] = m
  end
  -- A step above a worker's cap: as many passes as it takes, each paying `fixed`.
  return util.micro_models(models, self.hi)
end

function Sim:best(t)
  local _, Tbest = minmax.solve(self:true_models(t), self.B, self.lo, self.local_max, { method = 'bisect' })
  return Tbest
end

-- Builds iteration t's stats under the batches in force.
function Sim:stats(t)
  if self.pending[t] then self.batches, self.micro = self.pending[t].batches, self.pending[t].micro end
  local workers, max_ms = {}, 0
  for i = 1, self.n do
    local b = self.batches[i]
    local k = self.micro[i] or 1  -- the plan's count (apply() checks it keeps within the cap)
    local ms = b > 0 and (b / self:speed(i, t) * self.k + k * self.fixed) * (1 + self.noise * noise(i, t)) or 0.001
    workers[i] = { rank = i - 1, device = self.cluster.devices[i], local_batch = b, micro_batches = k,
                   compute_ms = ms, comm_ms = 2, samples_per_s = b > 0 and b / ms * 1000 or 0, memory_mb = 100 + b }
    if ms > max_ms then max_ms = ms end
  end
  for i = 1, self.n do
    local w = workers[i]
    w.idle_ms = max_ms - w.compute_ms
    w.step_ms = max_ms + w.comm_ms
  end
  local entry = { iteration = t, workers = workers }
  if #self.history >= self.window then table.remove(self.history, 1) end
  self.history[#self.history + 1] = entry
  self.trace[t] = self.batches
  self.micro_trace[t] = self.micro
  return { iteration = t, global_batch = self.B, workers = workers, history = self.history }
end

-- Iteration t's true max compute time and the best achievable one.
function Sim:times(t)
  local models = self:true_models(t)
  return minmax.max_time(models, self.trace[t]), self:best(t)
end

function Sim:apply(plan, t)
  if plan == nil then return end
  T.ok(type(plan) == 'table' and type(plan.reason) == 'string', 'a plan has local_batch and a reason')
  local ok, why = util.check_plan(plan.local_batch, self.lo, self.local_max, self.B)
  T.ok(ok, ('plan at iteration %d: %s'):format(t, tostring(why)))
  for i, v in ipairs(plan.local_batch) do
    T.ok(v == v and v < math.huge, 'finite')
    -- What a worker holds at once, its micro-batch, within its cap.
    local k = plan.micro_batches and plan.micro_batches[i] or 1
    T.ok(math.ceil(v / k) <= self.hi[i], ('plan at iteration %d: worker %d gets %d in %d micro-batch(es), above its '
                                           .. 'cap %d'):format(t, i, v, k, self.hi[i]))
  end
  self.pending[t + self.lag] = { batches = plan.local_batch, micro = plan.micro_batches or {} }
  self.plans[#self.plans + 1] = { iteration = t, local_batch = plan.local_batch, reason = plan.reason }
end

-- Runs `policy` for iterations [from, to].
function Sim:run(policy, from, to)
  for t = from, to do self:apply(policy.step(self:stats(t)), t) end
end

-- Worst ratio of true max compute time to the best achievable over [from, to], and
-- a description of where it happened.
function Sim:worst(from, to)
  local worst, where = 0, ''
  for t = from, to do
    local got, best = self:times(t)
    if got / best > worst then
      worst = got / best
      where = ('iteration %d: max compute %.1f ms vs best %.1f ms, batches %s'):format(t, got, best,
                                                                                 table.concat(self.trace[t], ','))
    end
  end
  return worst, where
end

local function run_policy(name, opts, iterations)
  local sim = new_sim(opts)
  local policy = load_policy(name)
  policy.init(sim.cluster)
  sim:run(policy, 0, iterations - 1)
  return sim, policy
end

local speeds4 = { 1, 1, 0.5, 0.25 }

---------------------------------------------------------------------------------

T.test('equal hands out the equal split once, then keeps it', function()
  local sim = run_policy('equal', { speeds = speeds4, B = 514, initial = { 200, 200, 100, 14 } }, 10)
  T.eq(#sim.plans, 1)
  T.eq(sim.plans[1].local_batch, { 129, 129, 128, 128 })
  T.eq(sim.trace[9], { 129, 129, 128, 128 })
  -- Already equal: nothing to say.
  sim = run_policy('equal', { speeds = speeds4, B = 512 }, 5)
  T.eq(#sim.plans, 0)
  -- A cap bounds the micro-batch: the worker capped at 10 takes its equal share in 3.
  sim = run_policy('equal', { speeds = speeds4, B = 100, lo = { 0, 0, 0, 0 }, hi = { 10, 100, 100, 100 },
                              initial = { 1, 33, 33, 33 } }, 4)
  T.eq(sim.plans[1].local_batch, { 25, 25, 25, 25 })
  T.eq(sim.micro_trace[3], { 3, 1, 1, 1 })
  -- min_batch is respected.
  sim = run_policy('equal', { speeds = speeds4, B = 100, lo = { 40, 0, 0, 0 }, hi = { 100, 100, 100, 100 } }, 4)
  T.eq(sim.plans[1].local_batch, { 40, 20, 20, 20 })
end)

for _, lag in ipairs { 2, 3 } do
  for _, name in ipairs { 'proportional', 'boa', 'lbb' } do
    T.test(('%s converges within 5%% of the best plan (lag %d)'):format(name, lag), function()
      local sim = run_policy(name, { speeds = speeds4, lag = lag }, 40)
      local worst, where = sim:worst(15, 39)
      T.ok(worst <= 1.05, where)
      T.ok(#sim.plans <= 12, name .. ' keeps re-planning: ' .. #sim.plans .. ' plans')
    end)
  end
end

-- The memory caps (max_batch) bound a worker's micro-batch (issue 37): the fast,
-- small workers take more than fits at once, in micro-batches that each pay the
-- fixed cost, and boa and lbb reach the micro-batched optimum; proportional splits
-- by measured speed and micro-batches what exceeds a cap.
T.test('memory caps bind: a fast worker with little memory takes more in micro-batches', function()
  for _, name in ipairs { 'proportional', 'boa', 'lbb' } do
    local sim = run_policy(name, { speeds = speeds4, lo = { 0, 0, 0, 0 }, hi = { 150, 150, 512, 512 }, fixed = 5 }, 40)
    T.ok(sim.trace[39][1] > 150 and sim.trace[39][2] > 150, name .. ': the fast workers take more than their cap ('
                                                                   .. table.concat(sim.trace[39], ',') .. ')')
    T.ok((sim.micro_trace[39][1] or 1) >= 2, name .. ': in micro-batches')
    if name ~= 'proportional' then  -- it does not model the micro-batches' fixed costs
      local worst, where = sim:worst(15, 39)
      T.ok(worst <= 1.05, name .. ': ' .. where)
    end
  end
end)

T.test('proportional with the NARX predictor converges too', function()
  local sim = run_policy('proportional', { speeds = speeds4, params = { predictor = 'narx' } }, 40)
  local worst, where = sim:worst(15, 39)
  T.ok(worst <= 1.05, where)
end)

T.test('boa and lbb learn intercepts: a large fixed cost per iteration', function()
  for _, name in ipairs { 'boa', 'lbb' } do
    local sim = run_policy(name, { speeds = speeds4, fixed = 60 }, 40)
    local worst, where = sim:worst(15, 39)
    T.ok(worst <= 1.05, name .. ': ' .. where)
  end
end)

T.test('boa and lbb start from a warm-up profile (piecewise models, by device name)', function()
  -- The profile says time is flat below 16 samples: the sim's devices are linear
  -- from 0, so the models scale the profile to what they see.
  local profile = {}
  for _, speed in ipairs(speeds4) do
    local pts = {}
    for _, b in ipairs { 4, 8, 16, 32, 64, 128, 256 } do pts[#pts + 1] = { b, math.max(16, b) / speed + 5 } end
    profile['sim' .. speed] = pts
  end
  for _, name in ipairs { 'boa', 'lbb' } do
    local sim = run_policy(name, { speeds = speeds4, params = { profile = profile } }, 30)
    local worst, where = sim:worst(10, 29)
    T.ok(worst <= 1.05, name .. ': ' .. where)
  end
end)

-- Worker 3 (rank 2) slows to 0.3x at iteration 50 and recovers at 100.
local function drop(i, t, base)
  if i == 3 and t >= 50 and t < 100 then return 0.3 * base end
  return base
end

for _, lag in ipairs { 2, 3 } do
  T.test(('lbb recovers within 10%% in 5 iterations of a slowdown and of the recovery (lag %d)'):format(lag),
         function()
    local sim = run_policy('lbb', { speeds = speeds4, lag = lag, speed_at = drop }, 150)
    local worst, where = sim:worst(20, 49)
    T.ok(worst <= 1.05, 'before: ' .. where)
    worst, where = sim:worst(55, 99)
    T.ok(worst <= 1.10, 'slowed: ' .. where)
    worst, where = sim:worst(105, 149)
    T.ok(worst <= 1.10, 'recovered: ' .. where)
  end)
end

T.test('boa refits a dynamic straggler\'s model and recovers within a few iterations', function()
  local sim = run_policy('boa', { speeds = speeds4, speed_at = drop }, 150)
  local worst, where = sim:worst(55, 99)
  T.ok(worst <= 1.10, 'slowed: ' .. where)
  worst, where = sim:worst(106, 149)
  T.ok(worst <= 1.10, 'recovered: ' .. where)
end)

T.test('boa and lbb drop a worker only with params.allow_drop', function()
  -- Worker 4 needs a second per sample: every plan that gives it one waits for it.
  local speeds = { 1, 1, 1, 0.001 }
  for _, name in ipairs { 'boa', 'lbb' } do
    local sim = run_policy(name, { speeds = speeds }, 20)
    for _, plan in ipairs(sim.plans) do T.ok(plan.local_batch[4] >= 1, name .. ' keeps every worker by default') end
    T.eq(sim.trace[19][4], 1, name .. ' gives it the least it may')
    sim = run_policy(name, { speeds = speeds, params = { allow_drop = true } }, 20)
    T.eq(sim.trace[19][4], 0, name .. ' drops it when allowed')
    local worst, where = sim:worst(10, 19)
    T.ok(worst <= 1.05, name .. ': ' .. where)
  end
end)

T.test('a plan that never shows up is given up, and the policy decides again', function()
  -- The engine drops every plan before iteration 20 (rejected, say).
  local sim = new_sim { speeds = speeds4 }
  local policy = load_policy('lbb')
  policy.init(sim.cluster)
  for t = 0, 39 do
    local plan = policy.step(sim:stats(t))
    if t >= 20 then sim:apply(plan, t) end
  end
  local worst, where = sim:worst(30, 39)
  T.ok(worst <= 1.05, where)
end)

local plain_copy = fixtures.plain_copy

T.test('save()/restore() carries each policy into a fresh instance', function()
  for _, name in ipairs { 'equal', 'proportional', 'boa', 'lbb' } do
    local opts = { speeds = speeds4, fixed = 20, speed_at = function(i, t, base)
      return (i == 2 and t >= 32) and 0.4 * base or base
    end }
    if name == 'proportional' then opts.params = { predictor = 'narx' } end
    local sim = new_sim(opts)
    local a = load_policy(name)
    a.init(sim.cluster)
    sim:run(a, 0, 29)
    local b = load_policy(name)
    b.init(sim.cluster)
    b.restore(plain_copy(a.save(), name))
    for t = 30, 60 do
      local stats = sim:stats(t)
      local pa, pb = a.step(stats), b.step(stats)
      T.eq(pb, pa, ('%s at iteration %d'):format(name, t))
      sim:apply(pa, t)
    end
    T.eq(plain_copy(b.save(), name), plain_copy(a.save(), name))
  end
end)

T.test('a hot swap hands models and the pending plan across policies', function()
  for _, pair in ipairs { { 'boa', 'lbb' }, { 'lbb', 'boa' }, { 'lbb', 'proportional' }, { 'proportional', 'lbb' } } do
    local sim = new_sim { speeds = speeds4, fixed = 20 }
    local old = load_policy(pair[1])
    old.init(sim.cluster)
    sim:run(old, 0, 19)
    local new = load_policy(pair[2])
    new.init(sim.cluster)
    new.restore(plain_copy(old.save(), pair[1]))
    sim:run(new, 20, 49)
    local worst, where = sim:worst(35, 49)
    T.ok(worst <= 1.05, pair[1] .. ' -> ' .. pair[2] .. ': ' .. where)
  end
end)

T.test('policies reject bad parameters with a message that names them', function()
  local sim = new_sim { speeds = speeds4 }
  local function init_with(name, params)
    local c = {}
    for k, v in pairs(sim.cluster) do c[k] = v end
    c.params = params
    load_policy(name).init(c)
  end
  T.raises(function() init_with('proportional', { predictor = 'lstm' }) end, "params.predictor must be 'ewma' or 'narx'")
  T.raises(function() init_with('lbb', { ft = 0.5, rt = 0.1 }) end, 'params.rt (0.1) must not be below params.ft')
  T.raises(function() init_with('boa', { min_gain = 'a lot' }) end, 'params.min_gain must be a number')
  T.raises(function() init_with('boa', { solver = 'simplex' }) end, "params.solver must be 'lp', 'bisect'")
  T.raises(function() init_with('lbb', { allow_drop = 'yes' }) end, 'params.allow_drop must be true or false')
  T.raises(function() init_with('lbb', { profile = 3 }) end, 'params.profile must be a table')
  T.raises(function() load_policy('equal').init { workers = 2, global_batch = 10, min_batch = { 0 }, max_batch = { 5, 5 } } end,
           'cluster.min_batch must be an array of 2 integers')
  T.raises(function() load_policy('equal').init { workers = 2, global_batch = 11000, min_batch = { 0, 0 }, max_batch = { 5, 5 } } end,
           'cannot be split within the bounds')
end)

-- 1024 workers at four speeds, B = 65536, starting from a split that is neither
-- equal nor balanced: init() and 30 steps of each policy, every plan valid (the
-- simulator checks each), and the answers' kinds (nil: 'keep', else the reason's
-- first word) printed. What init() and step() cost at this size is a benchmark's
-- claim (tools/bench/policy_bench.cpp, DESIGN.md habit 10), not this test's.
T.test('1024 workers: init() and 30 steps decide valid plans', function()
  for _, case in ipairs { { 'equal' }, { 'proportional' }, { 'proportional', 'narx' }, { 'boa' }, { 'lbb' } } do
    local name, predictor = case[1], case[2]
    local speeds, initial = {}, {}
    for i = 1, 1024 do speeds[i], initial[i] = speeds4[(i - 1) % 4 + 1], 48 + (i % 2) * 32 end
    local sim = new_sim { speeds = speeds, B = 65536, params = { predictor = predictor }, initial = initial }
    local policy = load_policy(name)
    policy.init(sim.cluster)
    local kinds = {}
    for t = 0, 29 do
      local plan = policy.step(sim:stats(t))
      local kind = plan and plan.reason:match('^[%w-]+') or 'keep'
      kinds[kind] = (kinds[kind] or 0) + 1
      sim:apply(plan, t)
    end
    local parts = {}
    for kind, n in pairs(kinds) do parts[#parts + 1] = ('%s %d'):format(kind, n) end
    table.sort(parts)
    print(('%-18s 1024 workers, 30 steps: %s'):format(name .. (predictor and (' ' .. predictor) or ''),
                                                       table.concat(parts, ', ')))
  end
end)

T.test('proportional_split sums to B when the scale lands exactly on a lower bound', function()
  -- lo/w*w rounds below lo here: a slope decided on scale * w_i would drop that worker and overshoot.
  local b = util.proportional_split({ 3 * 128 / 133, 128 / 389 }, 512, { 3, 1 }, { 1536, 512 })
  T.eq(b[1] + b[2], 512)
  T.ok(b[1] >= 3 and b[2] >= 1, "bounds")
end)

return T
