-- lpsolve: the MILP builder over lp_solve 5.5 (bindings/lpsolve.cpp). Known optima,
-- integer answers that differ from the LP relaxation, infeasible / unbounded / time-out
-- as values, argument errors that name the call and argument, re-solving a modified
-- model, the min-max allocation against brute force, and freeing.
local T = require 'tandem.testing'
local lp = require 'lpsolve'

math.randomseed(20240612)

local function solved(r, what)
  T.ok(r.ok, (what or 'solve') .. ': ' .. tostring(r.status) .. ' / ' .. tostring(r.message))
  return r
end

T.test('module: inf, version, an empty model', function()
  T.eq(lp.inf, 1e30)
  T.ok(type(lp.version) == 'string' and lp.version:match('^5%.5'), 'version ' .. tostring(lp.version))
  local m = lp.model()
  T.eq(m:var_count(), 0)
  T.eq(m:constraint_count(), 0)
  T.eq(tostring(m), 'lpsolve model (0 vars, 0 constraints)')
  -- lp_solve itself refuses a model without columns; its one point is the empty one.
  local r = m:solve()
  T.eq({ r.status, r.ok, r.objective, r.values }, { 'optimal', true, 0, {} })
  m:constraint({}, {}, '<=', 1)
  T.eq(m:solve().status, 'optimal')
  m:constraint({}, {}, '>=', 1)
  T.eq(m:solve().status, 'infeasible')
end)

T.test('a small LP: minimises by default, known optimum', function()
  -- min x + y  s.t.  x + 2y >= 4, 3x + y >= 6: the corner (1.6, 1.2).
  local m = lp.model()
  local x, y = m:var(), m:var {}
  T.eq({ x, y }, { 1, 2 })
  T.eq(m:constraint({ x, y }, { 1, 2 }, '>=', 4), 1)
  T.eq(m:constraint({ x, y }, { 3, 1 }, '>=', 6), 2)
  m:objective({ x, y }, { 1, 1 })
  local r = solved(m:solve())
  T.eq(r.status, 'optimal')
  T.eq(r.code, 0)
  T.near(r.objective, 2.8, 1e-9)
  T.near(r.values, { 1.6, 1.2 }, 1e-9)
  T.ok(type(r.message) == 'string' and r.message:find('optimal'), r.message)
  T.ok(type(r.ms) == 'number' and r.ms >= 0 and type(r.cpu_ms) == 'number' and r.cpu_ms >= 0 and
       type(r.iterations) == 'number', 'ms, cpu_ms and iterations given')
  T.eq(tostring(m), 'lpsolve model (2 vars, 2 constraints)')
end)

T.test('max objective, and a new objective replaces the old one', function()
  -- max 3x + 2y  s.t.  x + y <= 4, x + 3y <= 6, x <= 3: (3, 1), 11.
  local m = lp.model()
  local x = m:var { hi = 3 }
  local y = m:var()
  m:constraint({ x, y }, { 1, 1 }, '<=', 4)
  m:constraint({ x, y }, { 1, 3 }, '<=', 6)
  m:objective({ x, y }, { 3, 2 }, 'max')
  local r = solved(m:solve())
  T.near(r.objective, 11, 1e-9)
  T.near(r.values, { 3, 1 }, 1e-9)
  -- Only y now (x gets 0): y = 2 with x = 0, or any x up to 0 with 3y <= 6 - x.
  m:objective({ y }, { 1 }, 'max')
  r = solved(m:solve())
  T.near(r.objective, 2, 1e-9)
  T.near(r.values[2], 2, 1e-9)
  -- Back to minimising: 0 at the origin.
  m:objective({ x, y }, { 1, 1 }, 'min')
  r = solved(m:solve())
  T.near(r.objective, 0, 1e-12)
end)

T.test('a knapsack: the integer optimum differs from the LP relaxation', function()
  -- weights 5, 4, 3; values 10, 7.5, 5.5; capacity 7. LP: 10 + 7.5/2 = 13.75;
  -- integer: items 2 and 3, 13.
  local function knapsack(int)
    local m = lp.model()
    local cols = {}
    for i = 1, 3 do cols[i] = m:var { lo = 0, hi = 1, int = int, name = 'take' .. i } end
    m:constraint(cols, { 5, 4, 3 }, '<=', 7, 'capacity')
    m:objective(cols, { 10, 7.5, 5.5 }, 'max')
    return m, cols
  end
  local r = solved(knapsack(false):solve())
  T.near(r.objective, 13.75, 1e-9)
  T.near(r.values, { 1, 0.5, 0 }, 1e-9)
  local m, cols = knapsack(true)
  r = solved(m:solve())
  T.eq(r.status, 'optimal')
  T.near(r.objective, 13, 1e-9)
  T.near(r.values, { 0, 1, 1 }, 1e-9)
  -- set_int turns integrality off and on again on the same model.
  for _, c in ipairs(cols) do m:set_int(c, false) end
  T.near(solved(m:solve()).objective, 13.75, 1e-9)
  for _, c in ipairs(cols) do m:set_int(c, true) end
  T.near(solved(m:solve()).objective, 13, 1e-9)
end)

T.test('equality constraints, with == and =', function()
  -- min x + 2y + 3z  s.t.  x + y + z == 10, x - y = 2, z >= 1: (5.5, 3.5, 1), 15.5.
  local m = lp.model()
  local x, y, z = m:var(), m:var(), m:var { lo = 1 }
  m:constraint({ x, y, z }, { 1, 1, 1 }, '==', 10)
  m:constraint({ x, y }, { 1, -1 }, '=', 2)
  m:objective({ x, y, z }, { 1, 2, 3 })
  local r = solved(m:solve())
  T.near(r.objective, 15.5, 1e-9)
  T.near(r.values, { 5.5, 3.5, 1 }, 1e-9)
end)

T.test('negative and infinite bounds', function()
  -- min x + y  s.t.  y >= 2x - 1, x in [-5, 10], y free: x = -5, y = -11.
  local m = lp.model()
  local x = m:var { lo = -5, hi = 10 }
  local y = m:var { lo = -math.huge, hi = math.huge }
  m:constraint({ x, y }, { -2, 1 }, '>=', -1)
  m:objective({ x, y }, { 1, 1 })
  local r = solved(m:solve())
  T.near(r.values, { -5, -11 }, 1e-9)
  T.near(r.objective, -16, 1e-9)
  -- lp.inf is accepted as infinity too, and a negative upper bound works:
  -- min y - x  s.t.  y >= 2x - 1, x <= -7, y >= -20: where 2x - 1 meets -20.
  m:set_bounds(x, -lp.inf, -7)
  m:set_bounds(y, -20, lp.inf)
  m:objective({ x, y }, { -1, 1 })
  r = solved(m:solve())
  T.near(r.values, { -9.5, -20 }, 1e-9)
  T.near(r.objective, -10.5, 1e-9)
end)

T.test('infeasible models come back as a status', function()
  local m = lp.model()
  local x, y = m:var(), m:var()
  m:constraint({ x, y }, { 1, 1 }, '<=', 1)
  m:constraint({ x, y }, { 1, 1 }, '>=', 2)
  m:objective({ x }, { 1 })
  local r = m:solve()
  T.eq(r.status, 'infeasible')
  T.eq(r.ok, false)
  T.eq(r.values, nil)
  T.eq(r.objective, nil)
  T.ok(r.message:find('infeasible'), r.message)
  -- Integer-infeasible only: 2x == 1 with x integer.
  m = lp.model()
  x = m:var { int = true, hi = 10 }
  m:constraint({ x }, { 2 }, '==', 1)
  T.eq(m:solve().status, 'infeasible')
  -- Bounds that contradict a constraint.
  m = lp.model()
  x = m:var { lo = 5, hi = 6 }
  m:constraint({ x }, { 1 }, '<=', 4)
  T.eq(m:solve().status, 'infeasible')
end)

T.test('unbounded models come back as a status', function()
  local m = lp.model()
  local x, y = m:var(), m:var()
  m:constraint({ x, y }, { 1, -1 }, '<=', 1)
  m:objective({ x, y }, { 1, 1 }, 'max')
  local r = m:solve()
  T.eq(r.status, 'unbounded')
  T.eq(r.ok, false)
  T.eq(r.values, nil)
  -- A variable in no constraint, with an infinite bound in the objective's direction:
  -- lp_solve itself calls this OPTIMAL with an objective of 1e30.
  m = lp.model()
  x = m:var { lo = -math.huge }
  m:objective({ x }, { 1 })
  r = m:solve()
  T.eq(r.status, 'unbounded', r.message)
  T.eq(r.ok, false)
  T.eq(r.values, nil)
  m = lp.model()
  x, y = m:var(), m:var { hi = 2 }
  m:constraint({ y }, { 1 }, '>=', 1)
  m:objective({ x, y }, { 2, 1 }, 'max')
  T.eq(m:solve().status, 'unbounded')
  m:set_bounds(x, 0, 4)
  T.near(solved(m:solve()).objective, 10, 1e-9)
end)

-- A 50-item subset sum: maximise the weight packed into half the total. Odd weights
-- around a million make it hard for branch and bound.
local function subset_sum(n)
  local m = lp.model()
  local cols, w, total = {}, {}, 0
  for i = 1, n do
    cols[i] = m:var { lo = 0, hi = 1, int = true }
    w[i] = 2 * math.random(0, 999999) + 1000001
    total = total + w[i]
  end
  local cap = math.floor(total / 2)
  m:constraint(cols, w, '<=', cap)
  m:objective(cols, w, 'max')
  return m, w, cap
end

T.test('a time-out with an incumbent is suboptimal (or a timeout), never an error', function()
  for _, limit in ipairs { 0.05, 0.0005 } do
    local m, w, cap = subset_sum(50)
    local r = m:solve { time_limit_s = limit }
    T.ok(r.status == 'suboptimal' or r.status == 'timeout', 'status ' .. r.status .. ': ' .. r.message)
    -- The limit counts the solve's CPU time: cut off once that reached it, soon after.
    T.ok(r.cpu_ms >= 1000 * limit and r.cpu_ms < 1000 * limit + 500,
         ('stopped at the limit: %.2f ms of CPU for %g s'):format(r.cpu_ms, limit))
    T.ok(r.message:find('time limit'), r.message)
    if r.status == 'suboptimal' then
      T.ok(r.ok)
      local sum = 0
      for i, v in ipairs(r.values) do
        T.ok(v == 0 or v == 1, 'binary value ' .. v)
        sum = sum + w[i] * v
      end
      T.ok(sum <= cap, 'the incumbent is feasible')
      T.near(r.objective, sum, 1e-6)
    else
      T.eq(r.ok, false)
      T.eq(r.values, nil)
    end
    -- The same model solves again (the deadline is per solve).
    local again = m:solve { time_limit_s = 0.02 }
    T.ok(again.status == 'suboptimal' or again.status == 'timeout', again.status)
  end
end)

T.test('a model re-solves after a time-out at the very first check', function()
  -- lp_solve crashes re-solving an lprec aborted this early; the binding continues with
  -- a copy of the model, which must be the same model.
  local m = subset_sum(50)
  local spare = m:var { lo = -1, hi = 2, name = 'spare' }
  m:constraint({ spare }, { 1 }, '>=', -0.5, 'spare_row')
  local before = m:write_lp()
  T.ok(before:find('spare_row: +spare >= -0.5;', 1, true) and before:find('-1 <= spare <= 2;', 1, true), before)
  for _ = 1, 3 do
    local r = m:solve { time_limit_s = 1e-9 }
    T.eq(r.status, 'timeout', r.message)
    T.eq(m:write_lp(), before, 'the same model after the time-out')
  end
  local r = m:solve { time_limit_s = 0.02 }
  T.ok(r.status == 'suboptimal' or r.status == 'timeout', r.status)
  -- Modifications after a time-out apply to the continuing model.
  local x = m:var { hi = 1, int = true, name = 'extra' }
  m:constraint({ x }, { 1 }, '<=', 0)
  for i = 1, 50 do m:set_bounds(i, 0, 0) end
  r = solved(m:solve { time_limit_s = 1 })
  T.eq(r.status, 'optimal')
  T.near(r.objective, 0, 0)
  T.eq(m:var_count(), 52)
end)

T.test('a time-out without any integer solution is a timeout', function()
  -- sum of 2 x_i == 41 over 40 binaries: no integer point, but every LP relaxation
  -- is feasible, so branch and bound cannot finish; no incumbent is ever found.
  local m = lp.model()
  local cols, twos = {}, {}
  for i = 1, 40 do cols[i], twos[i] = m:var { hi = 1, int = true }, 2 end
  m:constraint(cols, twos, '==', 41)
  m:objective(cols, twos, 'max')
  local r = m:solve { time_limit_s = 0.05 }
  T.eq(r.status, 'timeout', r.message)
  T.eq(r.ok, false)
  T.eq(r.values, nil)
  T.ok(r.cpu_ms >= 50 and r.cpu_ms < 550, ('stopped at the limit: %.2f ms of CPU'):format(r.cpu_ms))
end)

T.test('argument errors name the call, the argument and what is expected', function()
  local m = lp.model()
  local x, y = m:var(), m:var()
  T.raises(function() m:constraint({ x }, { 1 }, '<', 3) end,
           "lpsolve model:constraint: argument 3 (op) must be '<=', '>=' or '==', got '<'")
  T.raises(function() m:constraint({ x }, { 1 }, nil, 3) end, "argument 3 (op) must be '<=', '>=' or '==', got nil")
  T.raises(function() m:constraint({ 3 }, { 1 }, '<=', 3) end,
           'lpsolve model:constraint: argument 1 (cols) entry 1 must be a column index in 1..2, got 3')
  T.raises(function() m:constraint({ x, 1.5 }, { 1, 1 }, '<=', 3) end, 'argument 1 (cols) entry 2 must be a column index')
  T.raises(function() m:constraint({ x, '2' }, { 1, 1 }, '<=', 3) end, "entry 2 must be a column index in 1..2, got '2'")
  T.raises(function() m:constraint({ x, y }, { 1 }, '<=', 3) end,
           'lpsolve model:constraint: argument 2 (coefs) must have as many entries as argument 1 (cols) (2), got 1')
  T.raises(function() m:constraint({ x }, { 0 / 0 }, '<=', 3) end,
           'lpsolve model:constraint: argument 2 (coefs) entry 1 must be a finite number, got nan')
  T.raises(function() m:constraint({ x }, { math.huge }, '<=', 3) end, 'entry 1 must be a finite number, got inf')
  T.raises(function() m:constraint(x, { 1 }, '<=', 3) end, 'argument 1 (cols) must be an array of column indices, got 1')
  T.raises(function() m:constraint({ x }, 1, '<=', 3) end, 'argument 2 (coefs) must be an array of numbers, got 1')
  T.raises(function() m:constraint({ x }, { 1 }, '<=', 0 / 0) end, 'argument 4 (rhs) must be a number (not NaN), got nan')
  T.raises(function() m:constraint({ x }, { 1 }, '<=', 'ten') end, "argument 4 (rhs) must be a number, got 'ten'")
  T.raises(function() m:constraint({ x }, { 1 }, '==', math.huge) end, "argument 4 (rhs) must be finite for '=='")
  T.raises(function() m:constraint({ x }, { 1 }, '<=', 1, 7) end, 'argument 5 (name) must be a string or nil, got 7')
  T.raises(function() m:var(5) end, 'lpsolve model:var: argument 1 (options) must be a table')
  T.raises(function() m:var { low = 1 } end,
           "lpsolve model:var: argument 1 (options) has an unknown field 'low' (known: lo, hi, int, name)")
  T.raises(function() m:var { lo = 'a' } end, "field 'lo' of argument 1 must be a number, got 'a'")
  T.raises(function() m:var { lo = math.huge } end, "field 'lo' of argument 1 must be below +infinity")
  T.raises(function() m:var { hi = -math.huge } end, "field 'hi' of argument 1 must be above -infinity")
  T.raises(function() m:var { lo = 0 / 0 } end, "field 'lo' of argument 1 must be a number (not NaN)")
  T.raises(function() m:var { int = 1 } end, "field 'int' of argument 1 must be true or false, got 1")
  T.raises(function() m:var { name = 3 } end, "field 'name' of argument 1 must be a string, got 3")
  T.raises(function() m:var { lo = 2, hi = 1 } end, 'lpsolve model:var: argument 1 (options) must have lo <= hi')
  T.raises(function() m.var { lo = 1 } end, "lpsolve model:var: call it on a model with ':' (m:var(...)), got a table as self")
  T.raises(function() m:objective({ x }, { 1 }, 'maximise') end,
           "lpsolve model:objective: argument 3 (sense) must be 'min', 'max' or nil, got 'maximise'")
  T.raises(function() m:objective({ 9 }, { 1 }) end, 'lpsolve model:objective: argument 1 (cols) entry 1 must be a column index')
  T.raises(function() m:solve(1) end, 'lpsolve model:solve: argument 1 (options) must be a table')
  T.raises(function() m:solve { time_limit_s = 0 } end,
           "lpsolve model:solve: field 'time_limit_s' of argument 1 must be a number of seconds > 0")
  T.raises(function() m:solve { time_limit = 1 } end, "argument 1 (options) has an unknown field 'time_limit'")
  T.raises(function() m:set_bounds(3, 0, 1) end, 'lpsolve model:set_bounds: argument 1 (col) must be a column index in 1..2, got 3')
  T.raises(function() m:set_bounds(x, 2, 1) end, 'lpsolve model:set_bounds: must have lo <= hi')
  T.raises(function() m:set_int(x, 'yes') end, "lpsolve model:set_int: argument 2 (int) must be true or false, got 'yes'")
  T.raises(function() m:set_rhs(1, 0) end,
           'lpsolve model:set_rhs: argument 1 (row) must be a constraint index, but the model has no constraints yet, got 1')
  m:constraint({ x, y }, { 1, 1 }, '==', 1)
  T.raises(function() m:set_rhs(2, 0) end, 'argument 1 (row) must be a constraint index in 1..1, got 2')
  T.raises(function() m:set_rhs(1, math.huge) end, "argument 2 (value) must be finite for an '==' constraint")
  -- The errors left the model usable and unchanged.
  T.eq(m:var_count(), 2)
  T.eq(m:constraint_count(), 1)
  m:objective({ x, y }, { 1, 2 }, 'max')
  T.near(solved(m:solve()).objective, 2, 1e-9)
end)

T.test('argument errors point at the calling line', function()
  local m = lp.model()
  local line = debug.getinfo(1, 'l').currentline + 1
  local err = T.raises(function() m:constraint({}, {}, '!=', 0) end, 'argument 3 (op)')
  T.ok(err:find('test_lpsolve.lua:' .. line .. ':', 1, true), err)
end)

T.test('re-solving after set_bounds, set_rhs, and new vars and rows', function()
  -- max 3x + 2y  s.t.  x + y <= 4 (row 1), x + 3y <= 6 (row 2).
  local m = lp.model()
  local x, y = m:var(), m:var()
  local r1 = m:constraint({ x, y }, { 1, 1 }, '<=', 4)
  local r2 = m:constraint({ x, y }, { 1, 3 }, '<=', 6)
  m:objective({ x, y }, { 3, 2 }, 'max')
  T.near(solved(m:solve()).values, { 4, 0 }, 1e-9)
  m:set_bounds(x, 0, 3)
  local r = solved(m:solve())
  T.near(r.values, { 3, 1 }, 1e-9)
  T.near(r.objective, 11, 1e-9)
  m:set_rhs(r1, 3.5)
  r = solved(m:solve())
  T.near(r.values, { 3, 0.5 }, 1e-9)
  m:set_rhs(r2, 3)  -- x + 3y <= 3 with x = 3: y = 0
  T.near(solved(m:solve()).values, { 3, 0 }, 1e-9)
  -- After a solve lp_solve no longer allows row entry mode: rows go in column mode.
  local z = m:var { hi = 1, int = true, name = 'z' }
  T.eq(z, 3)
  T.eq(m:constraint({ x, z }, { 1, 1 }, '<=', 2.5), 3)
  m:objective({ x, y, z }, { 3, 2, 10 }, 'max')
  r = solved(m:solve())
  T.near(r.values, { 1.5, 0.5, 1 }, 1e-9)
  T.near(r.objective, 15.5, 1e-9)
  T.eq(m:var_count(), 3)
  T.eq(m:constraint_count(), 3)
end)

T.test('the objective before the constraints, no time limit', function()
  -- Row entry mode is still on when solve() comes: the binding leaves it first.
  local m = lp.model()
  local x, y = m:var(), m:var()
  m:objective({ x, y }, { 1, 1 }, 'max')
  m:constraint({ x, y }, { 1, 2 }, '<=', 4)
  m:constraint({ x, y }, { 3, 1 }, '<=', 6)
  local r = solved(m:solve { time_limit_s = math.huge })
  T.near(r.values, { 1.6, 1.2 }, 1e-9)
  T.near(r.objective, 2.8, 1e-9)
end)

T.test('vars added between constraints, repeated columns merged', function()
  local m = lp.model()
  local x = m:var { hi = 10 }
  m:constraint({ x, x }, { 1, 1 }, '<=', 8)  -- 2x <= 8
  local y = m:var { hi = 10 }
  m:constraint({ x, y, y }, { 1, 1, -0.5 }, '<=', 5)  -- x + 0.5y <= 5
  local z = m:var { hi = 1 }
  m:constraint({ y, z }, { 1, 1 }, '<=', 3)
  m:objective({ x, y, z, x }, { 1, 1, 1, 1 }, 'max')  -- 2x + y + z
  local r = solved(m:solve())
  T.near(r.values, { 4, 2, 1 }, 1e-9)
  T.near(r.objective, 11, 1e-9)
  T.eq(tostring(m), 'lpsolve model (3 vars, 3 constraints)')
  -- An empty row is accepted: 0 <= 1.
  m:constraint({}, {}, '<=', 1)
  T.near(solved(m:solve()).objective, 11, 1e-9)
end)

T.test('write_lp shows names, bounds, integers and the sense', function()
  local m = lp.model()
  local b = m:var { lo = 1, hi = 8, int = true, name = 'batch' }
  local t = m:var { name = 'T' }
  m:constraint({ b, t }, { 2, -1 }, '<=', -3, 'time')
  m:objective({ t }, { 1 }, 'min')
  local text = m:write_lp()
  T.ok(type(text) == 'string', 'a string')
  for _, want in ipairs { 'min: +T;', 'time: +2 batch -T <= -3;', '1 <= batch <= 8;', 'int batch;' } do
    T.ok(text:find(want, 1, true), 'has ' .. want .. ' in\n' .. text)
  end
  T.ok(solved(m:solve()).ok)
  T.eq(m:write_lp(), text, 'writing does not change the model')
end)

-- The min-max batch allocation: minimise T  s.t.  a_i b_i + c_i <= T,
-- sum b_i = B, 0 <= b_i <= cap_i (integers for the exact problem).
local function minmax_model(a, c, cap, B, int)
  local m = lp.model()
  local t = m:var { name = 'T' }
  local cols, ones = {}, {}
  for i = 1, #a do cols[i], ones[i] = m:var { lo = 0, hi = cap[i], int = int }, 1 end
  m:constraint(cols, ones, '==', B, 'global_batch')
  for i = 1, #a do m:constraint({ cols[i], t }, { a[i], -1 }, '<=', -c[i]) end
  m:objective({ t }, { 1 }, 'min')
  return m, cols
end

local function brute_force3(a, c, cap, B)
  local best
  for b1 = 0, cap[1] do
    for b2 = 0, cap[2] do
      local b3 = B - b1 - b2
      if b3 >= 0 and b3 <= cap[3] then
        local t = math.max(a[1] * b1 + c[1], a[2] * b2 + c[2], a[3] * b3 + c[3])
        if not best or t < best then best = t end
      end
    end
  end
  return best
end

T.test('min-max allocation, 3 workers: lp_solve equals brute force', function()
  for _ = 1, 60 do
    local a, c, cap = {}, {}, {}
    for i = 1, 3 do
      a[i] = 0.2 + 3 * math.random()
      c[i] = 10 * math.random()
      cap[i] = math.random(0, 12)
    end
    local B = math.random(0, cap[1] + cap[2] + cap[3] + 2)  -- sometimes infeasible
    local want = brute_force3(a, c, cap, B)
    local m, cols = minmax_model(a, c, cap, B, true)
    local r = m:solve { time_limit_s = 5 }
    if not want then
      T.eq(r.status, 'infeasible', 'B above the capacity')
    else
      solved(r, 'min-max')
      T.eq(r.status, 'optimal')
      T.near(r.objective, want, 1e-7 * want, 'the optimum T')
      local sum, worst = 0, 0
      for i, col in ipairs(cols) do
        local b = r.values[col]
        T.near(b, math.floor(b + 0.5), 1e-6, 'integer batch')
        b = math.floor(b + 0.5)
        sum = sum + b
        worst = math.max(worst, a[i] * b + c[i])
      end
      T.eq(sum, B)
      T.near(worst, want, 1e-7 * want, 'the allocation achieves T')
    end
    m:free()
  end
end)

T.test('min-max allocation, 64 workers, LP relaxation: T equals the water level', function()
  local n = 64
  local a, c, cap = {}, {}, {}
  local total_cap, max_c = 0, 0
  for i = 1, n do
    a[i] = 0.5 + 2 * math.random()
    c[i] = 5 * math.random()
    cap[i] = math.random(8, 64)
    total_cap = total_cap + cap[i]
    max_c = math.max(max_c, c[i])
  end
  local B = math.floor(0.6 * total_cap)
  local m, cols = minmax_model(a, c, cap, B, false)
  T.eq(m:var_count(), n + 1)
  T.eq(m:constraint_count(), n + 1)
  local r = solved(m:solve { time_limit_s = 1 })
  -- The LP optimum is the level T where sum_i clamp((T - c_i) / a_i, 0, cap_i) = B.
  local function fill(t)
    local s = 0
    for i = 1, n do s = s + math.min(cap[i], math.max(0, (t - c[i]) / a[i])) end
    return s
  end
  local lo, hi = max_c, max_c + 200 * 64
  for _ = 1, 200 do
    local mid = 0.5 * (lo + hi)
    if fill(mid) < B then lo = mid else hi = mid end
  end
  T.near(r.objective, hi, 1e-6 * hi, 'T is the water level')
  local sum = 0
  for i, col in ipairs(cols) do
    local b = r.values[col]
    T.ok(b >= -1e-9 and b <= cap[i] + 1e-9, 'within bounds')
    T.ok(a[i] * b + c[i] <= r.objective + 1e-6, 'within T')
    sum = sum + b
  end
  T.near(sum, B, 1e-6)
end)

T.test('set_coef: warm re-solves agree with fresh models', function()
  local n = 16
  local a, c, cap = {}, {}, {}
  for i = 1, n do a[i], c[i], cap[i] = 0.5 + 2 * math.random(), 5 * math.random(), math.random(4, 32) end
  local B = 200
  local warm, cols = minmax_model(a, c, cap, B, false)
  solved(warm:solve())
  for _ = 1, 30 do
    for i = 1, n do
      a[i] = a[i] * (0.7 + 0.6 * math.random())
      c[i] = 5 * math.random()
      warm:set_coef(1 + i, cols[i], a[i])  -- row 1 is the global batch
      warm:set_rhs(1 + i, -c[i])
    end
    local got = solved(warm:solve(), 'warm')
    local fresh = minmax_model(a, c, cap, B, false)
    local want = solved(fresh:solve(), 'fresh')
    T.near(got.objective, want.objective, 1e-9 * want.objective, 'warm equals fresh')
  end
  T.raises(function() warm:set_coef(n + 2, 1, 1) end, 'lpsolve model:set_coef: argument 1 (row) must be a constraint index in 1..17')
  T.raises(function() warm:set_coef(1, n + 2, 1) end, 'lpsolve model:set_coef: argument 2 (col) must be a column index in 1..17')
  T.raises(function() warm:set_coef(1, 1, 0 / 0) end, 'lpsolve model:set_coef: argument 3 (value) must be a finite number, got nan')
end)

T.test('free, __gc and use after free', function()
  local m = lp.model()
  m:var()
  m:free()
  T.eq(tostring(m), 'lpsolve model (freed)')
  T.raises(function() m:var() end, 'lpsolve model:var: the model was freed (model:free() was called)')
  T.raises(function() m:solve() end, 'lpsolve model:solve: the model was freed')
  T.raises(function() m:var_count() end, 'lpsolve model:var_count: the model was freed')
  m:free()  -- twice is fine
  m = nil
  -- Many models left to the collector, some freed, some solved, some half built.
  for i = 1, 300 do
    local k = lp.model()
    local x = k:var { hi = i }
    k:constraint({ x }, { 1 }, '<=', i / 2)
    if i % 3 == 0 then k:objective({ x }, { 1 }, 'max'); k:solve() end
    if i % 5 == 0 then k:free() end
  end
  collectgarbage()
  collectgarbage()
  T.eq(getmetatable(lp.model()), 'lpsolve model', 'the metatable is protected')
  T.raises(function() lp.model().free({}) end, "lpsolve model:free: call it on a model with ':'")
end)

return T
