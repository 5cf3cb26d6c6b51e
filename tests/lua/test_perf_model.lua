-- tandem.perf_model: linear and piecewise time models, their degenerate windows,
-- inverse, rapid-tune refit and save/load.
local T = require 'tandem.testing'
local pm = require 'tandem.perf_model'

T.test('linear recovers a*b + c from spread observations', function()
  local m = pm.linear { window = 10 }
  for _, b in ipairs { 16, 32, 64, 128, 96 } do m:observe(b, 0.5 * b + 7) end
  m:fit()
  -- The slope's prior (see perf_model's header) costs a fraction of a percent.
  T.near(m.a, 0.5, 0.005)
  T.near(m.c, 7, 0.5)
  T.near(m:predict(100), 57, 0.2)
  T.eq(m:predict(0), 0, 't(0) = 0: a dropped worker computes nothing')
  T.near(m:inverse(m:predict(100)), 100, 1e-9)
  T.eq(m:inverse(3), 0, 'below the intercept only b = 0 fits')
  T.eq(m:inverse(-1), -math.huge)
  T.eq(m:pieces(), { { a = m.a, c = m.c } })
end)

T.test('linear: one batch size only means time proportional to the batch', function()
  local m = pm.linear()
  T.ok(not m:ready())
  T.raises(function() m:predict(3) end, 'no observation yet')
  m:observe(64, 32):observe(64, 32)
  T.ok(m:ready())
  T.near(m:predict(128), 64, 1e-9)
  T.near(m.c, 0, 1e-12)
end)

T.test('linear: a degenerate window keeps the previous slope', function()
  local m = pm.linear { window = 3 }
  for _, b in ipairs { 10, 50, 90 } do m:observe(b, 2 * b + 20) end
  m:fit()
  local a = m.a
  T.near(a, 2, 0.02)
  -- The window now holds one batch size, timed 10 ms slower than the line: the
  -- slope stays, the intercept moves.
  for _ = 1, 3 do m:observe(40, 110) end
  m:fit()
  T.eq(m.a, a)
  T.near(m:predict(40), 110, 1e-9)
end)

T.test('linear: batches a few samples apart barely move the slope', function()
  local m = pm.linear { window = 20 }
  for _, b in ipairs { 20, 60, 100 } do m:observe(b, b + 10) end
  m:fit()
  -- Noisy times at 100 and 102 samples alone would say slope 5 (or -3).
  for k = 1, 10 do
    m:observe(100, 110 + (k % 2) * 0.5)
    m:observe(102, 112 + (k % 2) * 10)
  end
  m:fit()
  T.ok(m.a > 0.8 and m.a < 1.6, 'slope stays near 1, got ' .. m.a)
end)

T.test('linear: decreasing or negative-intercept fits are clamped', function()
  local m = pm.linear()
  m:observe(10, 100):observe(100, 50) -- time falling with the batch
  m:fit()
  T.ok(m.a > 0, 'slope stays positive')
  T.ok(m.c >= 0)
  T.ok(m:predict(100) > m:predict(10))
  local n = pm.linear()
  n:observe(10, 1):observe(100, 100) -- the line would cross zero at b = 9.1
  n:fit()
  T.eq(n.c, 0)
  T.ok(n.a > 0)
end)

T.test('linear: refit_latest keeps the shape through the latest point and drops the window', function()
  local m = pm.linear { window = 20 }
  for _, b in ipairs { 10, 50, 90 } do m:observe(b, 2 * b + 20) end
  m:fit()
  local a, c = m.a, m.c
  local f = 360 / m:predict(50) -- three times slower
  m:refit_latest(50, 360)
  T.near(m:predict(50), 360, 1e-9)
  T.near(m.a, f * a, 1e-9)
  T.near(m.c, f * c, 1e-9)
  T.eq(m.obs.n, 1, 'the stale window is gone')
  m:fit()
  T.near(m.a, f * a, 1e-9, 'a one-point window keeps the scaled slope')
end)

T.test('linear: observations with b <= 0 are ignored, bad numbers raise', function()
  local m = pm.linear()
  m:observe(0, 0.01)
  T.ok(not m:ready())
  T.raises(function() m:observe(0 / 0, 1) end, 'two finite numbers')
  T.raises(function() pm.linear { window = 0 } end, 'window must be a positive integer')
end)

T.test('piecewise finds the knee of a flat-then-linear profile', function()
  local pts = {}
  for _, b in ipairs { 2, 4, 8, 16, 32, 64, 128, 256 } do pts[#pts + 1] = { b, math.max(12, 0.25 * b + 4) } end
  local m = pm.piecewise { points = pts }
  T.near(m.flat, 12, 1e-9)
  T.near(m.a, 0.25, 1e-9)
  T.near(m.c, 4, 1e-9)
  T.near(m:predict(8), 12, 1e-9)
  T.near(m:predict(200), 54, 1e-9)
  T.eq(m:predict(0), 0)
  T.eq(m:inverse(11), 0, 'below the flat part nothing fits')
  T.near(m:inverse(54), 200, 1e-9)
  T.eq(#m:pieces(), 2)
end)

T.test('piecewise accepts {b = , ms = } points and a purely linear profile', function()
  local m = pm.piecewise { points = { { b = 10, ms = 25 }, { b = 20, ms = 45 }, { b = 40, ms = 85 } } }
  T.eq(m.flat, 0)
  T.near(m:predict(30), 65, 1e-9)
  T.eq(#m:pieces(), 1)
  T.raises(function() pm.piecewise { points = { { 8, 10 }, { 8, 11 } } } end, 'two or more batch sizes')
  T.raises(function() pm.piecewise {} end, 'warm-up profile is required')
end)

T.test('piecewise scales its profile to training observations', function()
  local m = pm.piecewise { points = { { 8, 12 }, { 16, 12 }, { 64, 20 }, { 128, 36 } }, window = 3 }
  local base = m:predict(64)
  m:observe(64, 2 * base)
  T.near(m:predict(64), 2 * base, 1e-9)
  T.near(m:predict(128), 2 * 36, 1e-9, 'the shape is kept')
  m:observe(64, 2 * base):observe(64, 2 * base)
  m:refit_latest(64, base / 2)
  T.near(m:predict(64), base / 2, 1e-9)
end)

T.test('inverse is the largest b within T, so floor(inverse) never overshoots', function()
  local models = {
    pm.linear():observe(10, 13):observe(30, 29),
    pm.piecewise { points = { { 4, 9 }, { 8, 9 }, { 32, 21 }, { 64, 37 } } },
  }
  for _, m in ipairs(models) do
    for T_ms = 0, 60, 0.7 do
      local b = math.floor(m:inverse(T_ms))
      if b >= 0 then
        T.ok(m:predict(b) <= T_ms + 1e-9, 'predict(floor(inverse(T))) <= T')
        T.ok(m:predict(b + 1) > T_ms - 1e-9, 'and one more sample does not fit')
      end
    end
  end
end)

T.test('save and load reproduce the model', function()
  local m = pm.linear { window = 4 }
  for _, b in ipairs { 10, 20, 40, 80, 30 } do m:observe(b, 3 * b + 5 + b % 7) end
  m:fit()
  m:observe(50, 160) -- unfitted observation travels too
  local copy = pm.load(m:save())
  for _, b in ipairs { 1, 25, 100 } do T.near(copy:predict(b), m:predict(b), 1e-12) end
  copy:observe(60, 190)
  m:observe(60, 190)
  T.near(copy:predict(70), m:predict(70), 1e-12)
  local p = pm.piecewise { points = { { 4, 9 }, { 8, 9 }, { 32, 21 } } }:observe(32, 30)
  local pc = pm.load(p:save())
  T.near(pc:predict(20), p:predict(20), 1e-12)
  T.raises(function() pm.load { kind = 'cubic' } end, 'unknown model kind')
end)

-- A step of b samples in k micro-batches is k passes of b/k (issue 37): fed as such,
-- a linear model learns one pass's slope and fixed cost, and the micro-batched model
-- predicts a step in k passes as k fixed costs plus the samples' time.
T.test('micro-batches: per-pass observations, a step of k passes', function()
  local util = require 'tandem.policy_util'
  local m = pm.linear { window = 10 }
  for _, obs in ipairs { { 60, 3 }, { 40, 2 }, { 90, 3 }, { 20, 1 } } do
    local b, k = obs[1], obs[2]
    m:observe(util.per_pass { local_batch = b, micro_batches = k, compute_ms = 0.5 * b + 4 * k })
  end
  -- (The fit is ridge-regularised towards a prior slope: close, not exact.)
  T.near(m:predict(10), 0.5 * 10 + 4, 0.05 * 9, 'one pass of 10 samples')
  m.a, m.c, m.dirty = 0.5, 4, false
  m.obs.n = 0
  local step = pm.micro_batched(m, 20)
  T.eq(step:micro(20), 1)
  T.eq(step:micro(21), 2)
  T.near(step:predict(20), 0.5 * 20 + 4, 1e-6, 'within the cap: one pass')
  T.near(step:predict(50), 0.5 * 50 + 3 * 4, 1e-6, '50 samples under a cap of 20: three passes')
  T.near(step:inverse(0.5 * 50 + 3 * 4), 50, 1e-6)
  T.raises(function() pm.micro_batched(m, 0) end, 'cap must be a number >= 1')
end)

return T
