-- The goodput policy (scripts/policies/goodput.lua) and the noise-scale estimator
-- behind it (scripts/tandem/noise_scale.lua), driven by a cluster simulated in Lua
-- (no engine) whose global batch may change with every plan. Worker i computes b
-- samples in (b / speed_i * k + fixed) ms, times a small deterministic noise, and
-- every iteration pays `comm` ms of gradient all-reduce that does not grow with b.
-- Its gradient norms follow the noise-scale model of McCandlish et al.,
-- E|g_b|^2 = |G|^2 + tr(Sigma) / b with |G|^2 = 1, so the true B_noise = tr(Sigma)
-- is known. Each call of step() is one iteration; its plan applies `lag` calls later.
-- Every plan is checked as the engine checks one whose B may move (each b_i within
-- its bounds, the sum within [global_batch_min, global_batch_max], a reason, bsp
-- only) and its metrics as the trace takes them (at most 16 string keys, finite
-- numbers).
local T = require 'tandem.testing'
local util = require 'tandem.policy_util'
local noise_scale = require 'tandem.noise_scale'

local fixtures = require 'tests.lua.policy_fixtures'
local load_policy, noise = fixtures.load_policy, fixtures.noise

local function finite(v) return type(v) == 'number' and v == v and v > -math.huge and v < math.huge end

---------------------------------------------------------------------------------
-- The rules of a plan whose B may move.

-- true, or false and the first problem.
local function validate(plan, lo, hi, B_min, B_max)
  if type(plan) ~= 'table' then return false, 'a plan is a table' end
  if type(plan.reason) ~= 'string' or plan.reason == '' then return false, 'a plan has a reason' end
  if plan.mode ~= nil or plan.groups ~= nil then return false, 'goodput returns bsp plans only' end
  local b = plan.local_batch
  if type(b) ~= 'table' or #b ~= #lo then return false, 'one local batch per worker' end
  local sum = 0
  for i = 1, #lo do sum = sum + (type(b[i]) == 'number' and b[i] or 0) end
  if sum < B_min or sum > B_max then return false, ('B = %d outside [%d, %d]'):format(sum, B_min, B_max) end
  local ok, why = util.check_plan(b, lo, hi, sum)
  if not ok then return false, why end
  local m, keys = plan.metrics, 0
  if type(m) ~= 'table' then return false, 'a plan carries metrics' end
  for k, v in pairs(m) do
    keys = keys + 1
    if type(k) ~= 'string' then return false, 'metric keys are strings' end
    if not finite(v) then return false, ('metrics.%s = %s is not a finite number'):format(k, tostring(v)) end
  end
  if keys > 16 then return false, ('%d metrics, at most 16'):format(keys) end
  return true
end

---------------------------------------------------------------------------------
-- The simulated cluster. opts: speeds, B (B0), B_min, B_max (nil: the fields are
-- absent, B fixed), k (ms per sample at speed 1), fixed (compute ms per iteration),
-- comm (ms per iteration), noise (relative, times), lag, lo, hi, params, window,
-- b_noise (the true B_noise, or a function of the call), grad_noise (relative noise
-- of each norm), speed_at(i, t, base), initial (batches).
local Sim = {}
Sim.__index = Sim

local function new_sim(opts)
  local n = #opts.speeds
  local s = setmetatable({ n = n, B = opts.B or 64, k = opts.k or 1, fixed = opts.fixed or 0, comm = opts.comm or 2,
                           noise = opts.noise or 0, lag = opts.lag or 2, speeds = opts.speeds, speed_at = opts.speed_at,
                           window = opts.window or 20, b_noise = opts.b_noise or 256, grad_noise = opts.grad_noise or 0,
                           history = {}, pending = {}, plans = {}, trace = {}, iteration = 0 }, Sim)
  s.lo, s.hi = opts.lo, opts.hi
  if not s.lo then
    s.lo, s.hi = {}, {}
    for i = 1, n do s.lo[i], s.hi[i] = 0, opts.cap or 4096 end
  end
  s.B_min, s.B_max = opts.B_min or s.B, opts.B_max or s.B
  local devices = {}
  for i = 1, n do devices[i] = 'sim' .. s.speeds[i] end
  s.cluster = { workers = n, global_batch = s.B, min_batch = s.lo, max_batch = s.hi, devices = devices,
                params = opts.params or {}, history = s.window, global_batch_min = opts.B_min,
                global_batch_max = opts.B_max, lr_scaling = 'sqrt' }
  s.batches = opts.initial or util.equal_split(s.B, s.lo, s.hi)
  return s
end

function Sim:speed(i, t)
  if self.speed_at then return self.speed_at(i, t, self.speeds[i]) end
  return self.speeds[i]
end

-- Worker i's true compute time for b samples at call t, without noise.
function Sim:compute_ms(i, b, t)
  if b <= 0 then return 0 end
  return b / self:speed(i, t) * self.k + self.fixed
end

function Sim:true_b_noise(t)
  if type(self.b_noise) == 'function' then return self.b_noise(t) end
  return self.b_noise
end

function Sim:stats(t)
  if self.pending[t] then self.batches = self.pending[t].local_batch end
  self.iteration = self.iteration + 1
  local trace, B = self:true_b_noise(t), 0
  for i = 1, self.n do B = B + self.batches[i] end
  local workers = {}
  for i = 1, self.n do
    local b = self.batches[i]
    local ms = b > 0 and self:compute_ms(i, b, t) * (1 + self.noise * noise(i, t)) or 0.001
    workers[i] = { local_batch = b, compute_ms = ms, comm_ms = self.comm, data_ms = 0, optimizer_ms = 0,
                   samples_per_s = b > 0 and b / ms * 1000 or 0, memory_mb = 100 + b, steps = 1,
                   grad_sq = b > 0 and (1 + trace / b) * (1 + self.grad_noise * noise(i + 100, t)) or 0 }
  end
  local max_ms = 0
  for i = 1, self.n do max_ms = math.max(max_ms, workers[i].compute_ms) end
  for i = 1, self.n do
    workers[i].idle_ms = max_ms - workers[i].compute_ms
    workers[i].step_ms = max_ms + self.comm
  end
  local entry = { iteration = self.iteration, global_batch = B, workers = workers }
  if #self.history >= self.window then table.remove(self.history, 1) end
  self.history[#self.history + 1] = entry
  self.trace[t] = { B = B, batches = self.batches }
  return { iteration = self.iteration, global_batch = B, workers = workers, history = self.history, mode = 'bsp',
           global_grad_sq = (1 + trace / B) * (1 + self.grad_noise * noise(0, t)), iterations = 1, updates = 0,
           dropped = 0, server_busy_ms = 0 }
end

function Sim:apply(plan, t)
  if plan == nil then return end
  local ok, why = validate(plan, self.lo, self.hi, self.B_min, self.B_max)
  T.ok(ok, ('plan at call %d: %s'):format(t, tostring(why)))
  self.plans[#self.plans + 1] = { t = t, plan = plan }
  self.pending[t + self.lag] = plan
end

function Sim:run(policy, from, to)
  for t = from, to do self:apply(policy.step(self:stats(t)), t) end
end

local function run_policy(opts, calls)
  local sim = new_sim(opts)
  local policy = load_policy('goodput')
  policy.init(sim.cluster)
  sim:run(policy, 0, calls - 1)
  return sim, policy
end

-- The global batches the plans chose, in order.
local function chosen(sim)
  local out = {}
  for k, p in ipairs(sim.plans) do out[k] = p.plan.metrics.global_batch end
  return out
end

local function show(list)
  local out = {}
  for k, v in ipairs(list) do out[k] = tostring(v) end
  return '{' .. table.concat(out, ', ') .. '}'
end

local SPEEDS = { 1, 1, 0.5, 0.25 }

---------------------------------------------------------------------------------
-- The estimator

-- One observation's stats as the engine reports them, under batches b.
local function norm_stats(b, b_noise, g2, rel, t)
  local workers, B = {}, 0
  for i = 1, #b do
    B = B + b[i]
    local g = b[i] > 0 and (g2 + g2 * b_noise / b[i]) * (1 + rel * noise(i, t)) or 0
    workers[i] = { local_batch = b[i], grad_sq = g }
  end
  return { mode = 'bsp', global_batch = B, workers = workers,
           global_grad_sq = (g2 + g2 * b_noise / B) * (1 + rel * noise(0, t)) }
end

T.test('noise_scale: exact norms give B_noise exactly, at any B and any split', function()
  for _, case in ipairs { { b = { 16, 16, 16, 16 }, bn = 700 }, { b = { 50, 100, 150 }, bn = 20 },
                          { b = { 1000, 24, 0, 7 }, bn = 3e4 } } do
    local e = noise_scale.new()
    T.ok(e:observe(norm_stats(case.b, case.bn, 0.25, 0, 1)))
    T.near(e:b_noise(64), case.bn, 1e-6 * case.bn)
  end
end)

T.test('noise_scale: recovers a known B_noise within 20% from noisy norms while B changes', function()
  -- (The relative noise of the norms is smaller for the larger B_noise: |G|^2 is then
  -- a small difference of two large numbers, as McCandlish et al. note.)
  for _, case in ipairs { { bn = 100, rel = 0.05 }, { bn = 2000, rel = 0.02 }, { bn = 20000, rel = 0.005 } } do
    local e = noise_scale.new { alpha = 0.1 }
    for t = 1, 200 do
      -- Four workers, the global batch moving over 128..4096 from one observation to the next.
      local B = 128 * 2 ^ (t % 6)
      e:observe(norm_stats({ B / 4, B / 4, B / 2 - 8, 8 }, case.bn, 3, case.rel, t))
    end
    local got = e:b_noise(64)
    T.ok(math.abs(got / case.bn - 1) < 0.2, ('B_noise %g estimated as %.1f'):format(case.bn, got))
    T.eq(e.estimates, 200)
  end
end)

T.test('noise_scale: what carries no estimate is skipped; the prior and the clamp', function()
  local e = noise_scale.new()
  T.eq(e:b_noise(64, 123), 123, 'the prior before any estimate')
  local s = norm_stats({ 16, 16 }, 100, 1, 0, 1)
  for _, bad in ipairs { { global_grad_sq = 0 / 0 }, { global_grad_sq = -1 }, { global_grad_sq = math.huge },
                         { mode = 'grouped' }, { global_grad_sq = false } } do
    local copy = { mode = s.mode, global_grad_sq = s.global_grad_sq, workers = s.workers }
    for k, v in pairs(bad) do copy[k] = v end
    if bad.global_grad_sq == false then copy.global_grad_sq = nil end
    T.eq(e:observe(copy), false)
  end
  T.eq(e:observe({ mode = 'bsp', global_grad_sq = 1, workers = { { local_batch = 8, grad_sq = 0 / 0 },
                                                                  { local_batch = 8, grad_sq = 1 } } }), false)
  T.eq(e:observe({ mode = 'bsp', global_grad_sq = 1, workers = { { local_batch = 8, grad_sq = 2 },
                                                                  { local_batch = 0, grad_sq = 0 } } }), false,
       'one worker with samples: one batch size only')
  T.eq(e:observe({ mode = 'bsp', global_batch = 24, global_grad_sq = 1,
                   workers = { { local_batch = 8, grad_sq = 2 }, { local_batch = 8, grad_sq = 2 } } }), false,
       "batches that do not add up to the plan's B (a report missing)")
  -- Norms near the largest double: the estimate overflows and is dropped.
  T.eq(e:observe({ mode = 'bsp', global_grad_sq = 1e308, workers = { { local_batch = 1e9, grad_sq = 1e308 },
                                                                      { local_batch = 8, grad_sq = 1e308 } } }), false)
  T.eq(e.estimates, 0)
  -- |G_big|^2 above |G_small|^2: no noise measured, the lower end; |G|^2 <= 0: the upper.
  T.ok(e:observe({ mode = 'bsp', global_grad_sq = 2, workers = { { local_batch = 8, grad_sq = 1 },
                                                                  { local_batch = 8, grad_sq = 1 } } }))
  T.near(e:b_noise(64), 64e-6, 1e-12)
  local f = noise_scale.new()
  f:observe({ mode = 'bsp', global_grad_sq = 0.1, workers = { { local_batch = 8, grad_sq = 1 },
                                                               { local_batch = 8, grad_sq = 1 } } })
  T.eq(f:b_noise(64), 64e6)
end)

T.test('noise_scale: save and load as plain data, both kinds', function()
  for _, weighted in ipairs { false, true } do
    local e = noise_scale.new { alpha = 0.3, weighted = weighted }
    for t = 1, 5 do e:observe(norm_stats({ 8 * t, 24 }, 300, 1, 0.1, t)) end
    local copy = fixtures.read_literal(fixtures.literal(fixtures.plain_copy(e, 'noise')))
    local back = noise_scale.load(copy)
    T.eq(back:save(), e:save())
    T.eq(back:b_noise(32), e:b_noise(32))
    back:observe(norm_stats({ 8, 24 }, 300, 1, 0.1, 6))
    e:observe(norm_stats({ 8, 24 }, 300, 1, 0.1, 6))
    T.eq(back:save(), e:save())
  end
  -- A state saved before estimators carried alpha (star's old { estimates = 0 }).
  T.eq(noise_scale.load({ estimates = 0 }, 0.2):save(),
       { kind = 'noise_scale', alpha = 0.2, weighted = false, estimates = 0 })
  T.raises(function() noise_scale.load({ g2 = 0 / 0, trace = 1 }) end, 'finite')
  T.raises(function() noise_scale.load({ weighted = true, g2 = 1, trace = 1 }) end, 'sums')
  T.raises(function() noise_scale.new { alpha = 0 } end, 'alpha')
end)

T.test('noise_scale: weighted averages let estimates at a larger B outweigh those far below B_noise', function()
  -- Twenty estimates at B = 32 whose |G|^2 came out at a quarter of the truth (noise
  -- far below B_noise = 4000), then five exact ones at B = 512. Weighted, the
  -- |G|^2 average is within 2% of the truth; a plain EWMA with the same alpha
  -- (star's kind) has moved a tenth of the way.
  local function skewed(b, t)
    local s = norm_stats(b, 4000, 1, 0, t)
    local B = 0
    for i = 1, #b do B = B + b[i] end
    -- |G_big|^2 lowered so that the estimate of |G|^2 is 0.25 (tr(Sigma) moves a little).
    s.global_grad_sq = s.global_grad_sq - 0.75 * (B - B / #b) / B
    return s
  end
  local w, plain = noise_scale.new { alpha = 0.02, weighted = true }, noise_scale.new { alpha = 0.02 }
  for t = 1, 20 do
    for _, e in ipairs { w, plain } do T.ok(e:observe(skewed({ 8, 8, 8, 8 }, t))) end
  end
  T.near(w.g2, 0.25, 1e-9, 'the early estimates, averaged')
  for t = 21, 25 do
    for _, e in ipairs { w, plain } do T.ok(e:observe(norm_stats({ 128, 128, 128, 128 }, 4000, 1, 0, t))) end
  end
  T.ok(math.abs(w.g2 - 1) < 0.02, 'weighted |G|^2 ' .. w.g2)
  T.ok(plain.g2 < 0.4, 'plain |G|^2 ' .. plain.g2)
end)

---------------------------------------------------------------------------------
-- Choosing B

T.test('goodput: a small B_noise keeps B small', function()
  local sim = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 8, comm = 5, fixed = 2,
                           noise = 0.02, grad_noise = 0.05 }, 80)
  T.ok(sim.trace[79].B <= 64, ('B stays at or below B0: chose %s'):format(show(chosen(sim))))
end)

T.test('goodput: a large B_noise, or a large fixed cost, picks a larger B', function()
  -- The all-reduce (20 ms) outweighs the compute at B0 = 64 (~23 ms at 2.75 samples/ms).
  local sim = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 20,
                           noise = 0.02, grad_noise = 0.05 }, 80)
  T.ok(sim.trace[79].B >= 256, ('B grows: chose %s'):format(show(chosen(sim))))
  T.ok(#sim.plans >= 1 and sim.plans[1].plan.reason:find('^B 64 %-> '), sim.plans[1] and sim.plans[1].plan.reason)
  -- The same noise scale with a cheap all-reduce: less to amortise, a smaller B.
  local cheap = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 0.5,
                             noise = 0.02, grad_noise = 0.05 }, 80)
  T.ok(cheap.trace[79].B < sim.trace[79].B, ('cheap all-reduce: B %d, costly: B %d'):format(cheap.trace[79].B,
                                                                                          sim.trace[79].B))
  -- A fixed compute cost (20 ms an iteration inside compute_ms): at one batch per
  -- worker the models cannot see it (time proportional to the batch), but the first
  -- min-max split gives each worker a second batch size, from which they learn it.
  local fixed = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 0.5,
                             fixed = 20, noise = 0.02, grad_noise = 0.02 }, 100)
  T.ok(fixed.trace[99].B >= 256, ('fixed compute cost: B grows: chose %s'):format(show(chosen(fixed))))
end)

T.test('goodput: B follows a growing noise scale', function()
  local sim = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 2048, comm = 5, noise = 0.02, grad_noise = 0.05,
                           b_noise = function(t) return t < 60 and 32 or 8192 end }, 200)
  local early, late = sim.trace[59].B, sim.trace[199].B
  T.ok(early <= 64, 'B_noise 32: B stays small, got ' .. early)
  T.ok(late >= 4 * early, ('B_noise 8192: B grows (%d -> %d), chose %s'):format(early, late, show(chosen(sim))))
end)

T.test('goodput: the split at the chosen B is min-max (slower workers get fewer samples)', function()
  -- No fixed compute cost: the fallback model (time proportional to the batch, plus
  -- the measured all-reduce) is exact here, so predicted and true times agree.
  local sim = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 20 }, 60)
  T.ok(#sim.plans >= 1, 'a plan')
  for _, p in ipairs(sim.plans) do
    local b = p.plan.local_batch
    T.ok(b[1] >= b[3] and b[2] >= b[3] and b[3] >= b[4] and b[4] < b[1], 'slower, fewer: ' .. show(b))
    local hi_t, lo_t, slope = 0, math.huge, 0
    for i = 1, 4 do
      local ms = sim:compute_ms(i, b[i], p.t)
      hi_t, lo_t, slope = math.max(hi_t, ms), math.min(lo_t, ms), math.max(slope, sim.k / SPEEDS[i])
    end
    T.ok(hi_t - lo_t <= slope + 1e-9, ('times within one sample of the slowest: %s, %.2f..%.2f ms'):format(show(b),
                                                                                                        lo_t, hi_t))
    T.near(p.plan.metrics.iteration_ms, hi_t + sim.comm, 1e-6, 'predicted iteration time')
  end
end)

T.test('goodput: B and every local batch stay within their bounds', function()
  local lo, hi = { 4, 4, 2, 1 }, { 300, 300, 150, 40 }
  for _, case in ipairs { { bn = 1e5, comm = 50 }, { bn = 1, comm = 0.1 } } do
    local sim = run_policy({ speeds = SPEEDS, B = 100, B_min = 16, B_max = 2000, lo = lo, hi = hi, b_noise = case.bn,
                             comm = case.comm, noise = 0.02 }, 60)
    -- validate() checked every plan; the range the caps allow is 11..790.
    T.ok(#sim.plans >= 1, 'decided something')
    local B = sim.trace[59].B
    if case.bn > 1 then T.eq(B, 790, 'the caps bound B') else T.ok(B <= 32, 'small B: ' .. B) end
  end
end)

T.test('goodput: no flip-flop on noisy norms and times', function()
  local sim = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 600, comm = 10,
                           noise = 0.05, grad_noise = 0.3 }, 300)
  local Bs = chosen(sim)
  T.ok(#sim.plans <= 4, ('few plans: %d, B %s'):format(#sim.plans, show(Bs)))
  for _, p in ipairs(sim.plans) do T.ok(p.t < 80, ('settled after the start: a plan at call %d'):format(p.t)) end
  -- Never back to a B it left.
  local left = {}
  for k = 2, #Bs do
    left[Bs[k - 1]] = true
    T.ok(Bs[k] == Bs[k - 1] or not left[Bs[k]], 'returned to B ' .. Bs[k] .. ': ' .. show(Bs))
  end
end)

T.test('goodput: metrics name the quantities behind each decision', function()
  local sim = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 20,
                           noise = 0.02, grad_noise = 0.002 }, 40)
  T.ok(#sim.plans >= 1)
  for _, p in ipairs(sim.plans) do
    local m, sum = p.plan.metrics, 0
    for _, b in ipairs(p.plan.local_batch) do sum = sum + b end
    for _, key in ipairs { 'b_noise', 'noise_estimates', 'global_batch', 'global_batch_before', 'efficiency',
                           'iteration_ms', 'throughput', 'goodput', 'goodput_before', 'gain' } do
      T.ok(finite(m[key]), 'metrics.' .. key)
    end
    T.eq(m.global_batch, sum)
    T.near(m.goodput, m.throughput * m.efficiency, 1e-9 * m.goodput)
    T.near(m.throughput, 1000 * sum / m.iteration_ms, 1e-9 * m.throughput)
    T.near(m.efficiency, (m.b_noise + 64) / (m.b_noise + sum), 1e-12)
    T.ok(m.gain > 0.05, 'a change only above min_gain: ' .. m.gain)
    T.near(m.gain, m.goodput / m.goodput_before - 1, 1e-9)
    T.ok(math.abs(m.b_noise / 4096 - 1) < 0.3, 'B_noise measured: ' .. m.b_noise)
    T.ok(#p.plan.reason < 160, 'a short reason: ' .. p.plan.reason)
  end
end)

---------------------------------------------------------------------------------
-- Fixed B: re-splits only

T.test('goodput: with global_batch_min == max, or without them, B stays and the split is re-solved', function()
  for _, range in ipairs { { 256, 256 }, { nil, nil } } do
    local sim = run_policy({ speeds = SPEEDS, B = 256, B_min = range[1], B_max = range[2], b_noise = 1e5, comm = 20,
                             noise = 0.02, grad_noise = 0.05, speed_at = function(i, t, base)
      return (i == 2 and t >= 40) and base / 4 or base
    end }, 90)
    T.ok(#sim.plans >= 2, 'an initial re-split and one after the slowdown: ' .. #sim.plans)
    for _, p in ipairs(sim.plans) do
      T.eq(p.plan.metrics.global_batch, 256)
      T.ok(p.plan.reason:find('^re%-split at B 256'), p.plan.reason)
    end
    local first, last = sim.trace[30].batches, sim.trace[89].batches
    T.ok(first[1] > first[3] and first[3] > first[4], 'balanced to the speeds: ' .. show(first))
    T.ok(last[2] < first[2] / 2, ('rank 1 slowed down 4x: %s -> %s'):format(show(first), show(last)))
    T.ok(sim.plans[#sim.plans].t < 70, 'settled after the slowdown')
  end
end)

T.test('goodput: no decision before warmup observations, none before the plan in force has run', function()
  local sim = run_policy({ speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 20,
                           params = { warmup = 9 } }, 30)
  T.ok(#sim.plans >= 1 and sim.plans[1].t >= 8, 'first plan at call ' .. tostring(sim.plans[1] and sim.plans[1].t))
  for k = 2, #sim.plans do
    T.ok(sim.plans[k].t - sim.plans[k - 1].t >= sim.lag + 2, 'a plan runs `confirm` times before the next')
  end
end)

---------------------------------------------------------------------------------
-- State, parameters, sandbox

T.test('goodput: save()/restore() carries it into a fresh instance, directly or as text', function()
  local opts = { speeds = SPEEDS, B = 64, B_min = 32, B_max = 2048, comm = 5, noise = 0.03, grad_noise = 0.1,
                 b_noise = function(t) return t < 30 and 32 or 8192 end }
  for _, cut in ipairs { 12, 31, 33 } do
    local sim = new_sim(opts)
    local a = load_policy('goodput')
    a.init(sim.cluster)
    sim:run(a, 0, cut)
    local direct, text, fresh = load_policy('goodput'), load_policy('goodput'), load_policy('goodput')
    for _, p in ipairs { direct, text, fresh } do p.init(sim.cluster) end
    direct.restore(fixtures.plain_copy(a.save(), 'goodput'))
    text.restore(fixtures.read_literal(fixtures.literal(a.save())))
    local differs = false
    for t = cut + 1, 90 do
      local stats = sim:stats(t)
      local pa, pd, pt, pf = a.step(stats), direct.step(stats), text.step(stats), fresh.step(stats)
      T.eq(pd, pa, ('restored directly, call %d'):format(t))
      T.eq(pt, pa, ('restored from text, call %d'):format(t))
      if not pcall(T.eq, pf, pa) then differs = true end
      sim:apply(pa, t)
    end
    T.ok(differs, 'a fresh instance decides otherwise (so the check above shows something)')
    T.eq(fixtures.plain_copy(text.save(), 'goodput'), fixtures.plain_copy(a.save(), 'goodput'))
  end
end)

T.test("goodput: restore() takes star's noise scale and lbb's models", function()
  local sim = new_sim { speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 20 }
  local star = load_policy('star')
  star.init(sim.cluster)
  for t = 0, 9 do star.step(sim:stats(t)) end
  local g = load_policy('goodput')
  g.init(sim.cluster)
  g.restore(fixtures.plain_copy(star.save(), 'star'))
  T.eq(g.save().noise.estimates, 10)
  T.near(g.save().noise:b_noise(64), 4096, 1e-6 * 4096)
  local lbb = load_policy('lbb')
  lbb.init(sim.cluster)
  for t = 10, 19 do lbb.step(sim:stats(t)) end
  g.restore(fixtures.plain_copy(lbb.save(), 'lbb'))
  T.ok(g.save().models[4]:ready(), 'the models came over')
  T.eq(g.save().last_seen, lbb.save().last_seen)
end)

T.test('goodput: parameters and the range of B are checked', function()
  local function init_with(fields, params)
    local sim = new_sim { speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024 }
    local c = sim.cluster
    for k, v in pairs(fields) do c[k] = v end
    c.params = params or {}
    load_policy('goodput').init(c)
  end
  T.raises(function() init_with({}, { min_gain = -1 }) end, 'params.min_gain')
  T.raises(function() init_with({}, { warmup = 0.5 }) end, 'params.warmup')
  T.raises(function() init_with({}, { candidates = 40 }) end, 'params.candidates')
  T.raises(function() init_with({}, { solver = 'magic' }) end, 'params.solver')
  T.raises(function() init_with({ global_batch_min = 100, global_batch_max = 50 }) end, 'above global_batch_max')
  T.raises(function() init_with({ global_batch_min = 0 }) end, 'global_batch_min must be a positive integer')
  T.raises(function() init_with({ global_batch_max = 'big' }) end, 'global_batch_max must be a positive integer')
  T.raises(function() init_with({ global_batch_min = 20000, global_batch_max = 30000 }) end, "fits the workers' bounds")
  init_with({ lr_scaling = 42 }) -- informational: anything is accepted
end)

T.test('goodput: runs without os and io, sets no globals', function()
  local env = {}
  for k, v in pairs(_G) do env[k] = v end
  env.os, env.io = nil, nil
  local chunk = assert(loadfile(fixtures.policy_path('goodput')))
  setfenv(chunk, env)
  local policy = chunk()
  local sim = new_sim { speeds = SPEEDS, B = 64, B_min = 32, B_max = 1024, b_noise = 4096, comm = 20 }
  policy.init(sim.cluster)
  sim:run(policy, 0, 20)
  T.ok(#sim.plans >= 1)
  for k in pairs(env) do T.ok(_G[k] ~= nil or k == 'os' or k == 'io', 'set a global: ' .. k) end
end)

-- 64 and 256 workers in four speed classes, B free over 16x, with a slowdown half
-- way: every plan valid (the simulator checks each). What a decision costs at these
-- sizes is a benchmark's claim (tools/bench/policy_bench.cpp), not this test's.
T.test('goodput: 64 and 256 workers decide valid plans', function()
  local classes = { 1, 1, 0.9, 0.3 }
  for _, n in ipairs { 64, 256 } do
    local speeds = {}
    for i = 1, n do speeds[i] = classes[(i - 1) % 4 + 1] end
    local sim = new_sim { speeds = speeds, B = 16 * n, B_min = 4 * n, B_max = 64 * n, b_noise = 64 * n, comm = 20,
                          noise = 0.02, grad_noise = 0.05, speed_at = function(i, t, base)
      return (i == 5 and t >= 20) and base / 4 or base
    end }
    local policy = load_policy('goodput')
    policy.init(sim.cluster)
    sim:run(policy, 0, 39)
    T.ok(#sim.plans >= 1, n .. ' workers: decided something')
  end
end)

return T
