-- tandem.minmax: the exact integer min-max allocation against brute force, its
-- infeasible cases, dropping workers, and the LP path against lp_solve's own
-- branch and bound on 64 workers.
local T = require 'tandem.testing'
local pm = require 'tandem.perf_model'
local minmax = require 'tandem.minmax'

math.randomseed(20240611)

local function linear(a, c)
  local m = pm.linear()
  m.a, m.c = a, c
  return m
end

local function random_model()
  if math.random() < 0.5 then
    return linear(0.2 + 3 * math.random(), 10 * math.random() * math.random())
  end
  local flat, a = 2 + 8 * math.random(), 0.3 + 2 * math.random()
  local pts = {}
  for _, b in ipairs { 1, 2, 4, 8, 16, 32 } do pts[#pts + 1] = { b, math.max(flat, a * b) } end
  return pm.piecewise { points = pts }
end

-- A random instance with a feasible B.
local function random_instance()
  local n = math.random(2, 4)
  local models, lo, hi = {}, {}, {}
  local sum_lo, sum_hi = 0, 0
  for i = 1, n do
    models[i] = random_model()
    lo[i] = math.random() < 0.5 and 0 or math.random(0, 3)
    hi[i] = lo[i] + math.random(0, 14)
    sum_lo, sum_hi = sum_lo + lo[i], sum_hi + hi[i]
  end
  local B = math.random(sum_lo, math.min(sum_hi, 30))
  return models, B, lo, hi
end

local function check_allocation(b, B, lo, hi)
  local sum = 0
  for i = 1, #lo do
    T.ok(b[i] == math.floor(b[i]) and b[i] >= lo[i] and b[i] <= hi[i], 'batch within bounds')
    sum = sum + b[i]
  end
  T.eq(sum, B, 'the batches sum to B')
end

local function against_brute_force(method, count)
  for _ = 1, count do
    local models, B, lo, hi = random_instance()
    local want_b, want_T = minmax.brute_force(models, B, lo, hi)
    local b, got_T, info = minmax.solve(models, B, lo, hi, { method = method })
    T.ok(b, 'solved')
    check_allocation(b, B, lo, hi)
    T.near(got_T, want_T, 1e-9 * want_T, method .. ' optimum equals brute force')
    T.near(minmax.max_time(models, b), got_T, 0, 'T is the allocation\'s max time')
    T.eq(info.method, method)
    T.ok(want_b)
  end
end

T.test('greedy matches brute force on random small instances', function() against_brute_force('greedy', 300) end)

T.test('the LP bound plus integer finish matches brute force', function() against_brute_force('lp', 300) end)

T.test('the bisection bound plus integer finish matches brute force', function() against_brute_force('bisect', 300) end)

T.test('lp_solve branch and bound matches brute force', function() against_brute_force('milp', 100) end)

T.test('infeasible bounds give nil and a message that says what to change', function()
  local models = { linear(1, 0), linear(1, 0) }
  local b, msg = minmax.solve(models, 30, { 0, 0 }, { 10, 10 })
  T.eq(b, nil)
  T.ok(msg:find('maxima to 20', 1, true) and msg:find('raise the memory caps', 1, true), msg)
  b, msg = minmax.solve(models, 3, { 2, 2 }, { 10, 10 })
  T.eq(b, nil)
  T.ok(msg:find('minima sum to 4', 1, true), msg)
  T.raises(function() minmax.solve(models, 3, { 0 }, { 1, 1 }) end, 'arrays of 2 integers')
  T.raises(function() minmax.solve({ {} }, 3, { 0 }, { 3 }) end, 'predict(b) and inverse(T)')
  T.raises(function() minmax.solve(models, 2.5, { 0, 0 }, { 3, 3 }) end, 'non-negative integer')
  T.raises(function() minmax.solve(models, 2, { 0, 0 }, { 3, 3 }, { method = 'simplex' }) end, "must be 'lp', 'bisect'")
end)

T.test('a worker whose fixed cost exceeds the others\' time is dropped only when lo = 0', function()
  local models = { linear(1, 0), linear(1, 0), linear(1, 200) }
  for _, method in ipairs { 'lp', 'bisect', 'milp', 'greedy' } do
    local b, Tmax = minmax.solve(models, 100, { 0, 0, 0 }, { 100, 100, 100 }, { method = method })
    T.eq(b, { 50, 50, 0 }, method)
    T.eq(Tmax, 50)
    b, Tmax = minmax.solve(models, 100, { 0, 0, 1 }, { 100, 100, 100 }, { method = method })
    T.eq(b[3], 1, method .. ': lo = 1 keeps it')
    T.eq(Tmax, 201)
  end
end)

T.test('the memory caps bind', function()
  local models = { linear(1, 0), linear(4, 0) }
  local b = minmax.solve(models, 100, { 0, 0 }, { 60, 100 })
  T.eq(b, { 60, 40 })
end)

local function big_instance(n, B)
  local models, lo, hi = {}, {}, {}
  for i = 1, n do
    local speed = ({ 1, 1, 0.5, 0.25 })[(i - 1) % 4 + 1] * (0.9 + 0.2 * math.random())
    models[i] = linear(1 / speed, 2 + 3 * math.random())
    lo[i], hi[i] = 1, math.floor(2 * B / n)
  end
  return models, B, lo, hi
end

T.test('64 workers: the LP path reaches lp_solve\'s integer optimum; time per solve', function()
  local models, B, lo, hi = big_instance(64, 4096)
  local b, Tlp, info = minmax.solve(models, B, lo, hi)
  check_allocation(b, B, lo, hi)
  local bm, Tm, im = minmax.solve(models, B, lo, hi, { method = 'milp', time_limit_s = 20 })
  T.ok(bm, 'milp solved')
  check_allocation(bm, B, lo, hi)
  local _, Tg = minmax.solve(models, B, lo, hi, { method = 'greedy' })
  T.near(Tlp, Tg, 1e-9 * Tg, 'lp path equals the greedy reference')
  if im.status == 'optimal' then
    T.near(Tlp, Tm, 1e-6 * Tm, 'lp path equals the MILP optimum')
  else
    T.ok(Tlp <= Tm + 1e-9, 'lp path no worse than the MILP incumbent')
  end
  T.ok(info.steps < 64, 'the LP bound leaves fewer than N samples to the finish, left ' .. info.steps)
  -- Timed with the JIT on (this runner) and off (as the engine runs policies).
  local function per_solve(method)
    local reps = 200
    local t0 = os.clock()
    for _ = 1, reps do minmax.solve(models, B, lo, hi, { method = method }) end
    return (os.clock() - t0) * 1000 / reps
  end
  local jit_lp, jit_bisect = per_solve('lp'), per_solve('bisect')
  jit.off()
  jit.flush()
  local int_lp, int_bisect = per_solve('lp'), per_solve('bisect')
  jit.on()
  print(('minmax.solve, 64 workers, B = %d, ms per solve: lp %.3f (interpreted %.3f), bisect %.3f (interpreted '
         .. '%.3f); milp status %s'):format(B, jit_lp, int_lp, jit_bisect, int_bisect, im.status))
end)

-- The slowest workers' fixed cost alone sets the optimum (their one sample takes
-- longer than the fast ones need for dozens), and workers of one type are identical:
-- the bound's start then holds far more than B samples, and the start must be
-- lowered before the finish (it moved ~37000 samples one at a time before).
T.test('a fixed cost that pins the optimum: the start is lowered, the answer stays exact', function()
  for _, n in ipairs { 8, 64, 1024 } do
    local models, lo, hi = {}, {}, {}
    for i = 1, n do
      local speed = ({ 1, 0.7, 0.5, 0.25 })[math.floor(4 * (i - 1) / n) + 1]
      models[i] = linear(0.02 / speed, 1 / speed)
      lo[i], hi[i] = 1, 32 * n
    end
    local B = 32 * n
    local _, Tg = minmax.solve(models, B, lo, hi, { method = 'greedy' })
    for _, method in ipairs(n <= 64 and { 'lp', 'bisect' } or { 'bisect' }) do
      local b, Tm, info = minmax.solve(models, B, lo, hi, { method = method })
      check_allocation(b, B, lo, hi)
      T.near(Tm, Tg, 1e-9 * Tg, method .. ' equals the greedy reference at ' .. n .. ' workers')
      T.near(Tm, 1.02 / 0.25, 1e-9, 'the slowest workers\' one sample sets the max')
      T.ok(info.steps <= n, ('%s at %d workers leaves at most N samples to the finish, left %d')
                              :format(method, n, info.steps))
    end
  end
end)

-- Micro-batched models (issue 37): a worker capped at a few samples takes more in
-- several passes, each paying its fixed cost. Every method's optimum equals brute
-- force on random small instances (caps 1 to 6, random one-pass models), and the
-- model's inverse is exact: floor(inverse(T)) is the largest integer b with
-- predict(b) <= T.
T.test('micro-batched models: exact against brute force, inverse exact', function()
  local util = require 'tandem.policy_util'
  for _ = 1, 150 do
    local n = math.random(2, 4)
    local base, caps, lo, hi = {}, {}, {}, {}
    for i = 1, n do
      base[i] = random_model()
      caps[i] = math.random(1, 6)
      lo[i], hi[i] = math.random() < 0.5 and 0 or 1, 30
    end
    local models = util.micro_models(base, caps)
    local B = math.random(n, 30)
    local _, want_T = minmax.brute_force(models, B, lo, hi)
    for _, method in ipairs { 'lp', 'bisect', 'greedy' } do
      local b, got_T = minmax.solve(models, B, lo, hi, { method = method })
      check_allocation(b, B, lo, hi)
      T.near(got_T, want_T, 1e-9 * want_T, method .. ' with micro-batches equals brute force')
    end
    for i = 1, n do
      local m = models[i]
      for b = 1, 30 do T.ok(m:predict(b) <= m:predict(b + 1) + 1e-12, 'nondecreasing') end
      local T0 = m:predict(math.random(1, 30)) * (0.5 + math.random())
      local x = math.floor(m:inverse(T0) + 1e-9)
      T.ok(m:predict(x) <= T0 * (1 + 1e-12), 'predict(floor(inverse(T))) <= T')
      T.ok(m:predict(x + 1) > T0, 'and one more sample exceeds T')
    end
  end
end)

-- What the solve costs at this size: tools/bench/policy_bench.cpp (min-max solve).
T.test('1024 workers solve to a valid allocation', function()
  local models, B, lo, hi = big_instance(1024, 65536)
  local b, _, info = minmax.solve(models, B, lo, hi)
  check_allocation(b, B, lo, hi)
  print(('minmax.solve (%s), 1024 workers, B = %d: %d finishing steps'):format(info.method, B, info.steps))
end)

return T
