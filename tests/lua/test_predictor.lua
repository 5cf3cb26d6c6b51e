-- tandem.predictor: EWMA and the linear NARX speed predictor.
local T = require 'tandem.testing'
local pr = require 'tandem.predictor'

T.test('ewma smooths with alpha and starts at the first value', function()
  local e = pr.ewma { alpha = 0.5 }
  T.eq(e:predict(), nil)
  e:observe(10)
  T.eq(e:predict(), 10)
  e:observe(20)
  T.eq(e:predict(), 15)
  e:observe(20)
  T.eq(e:predict(), 17.5)
  T.raises(function() pr.ewma { alpha = 0 } end, 'alpha must be in (0, 1]')
  T.raises(function() e:observe(0 / 0) end, 'finite number')
end)

T.test('narx predicts the last value until it has enough rows', function()
  local m = pr.narx { p = 2, q = 1 }
  T.eq(m:predict(), nil)
  m:observe(100, 32)
  T.eq(m:predict(), 100)
  m:observe(120, 32):observe(90, 32)
  T.eq(m:predict(), 90)
end)

T.test('narx learns a linear autoregression with an exogenous input', function()
  -- y_t = 0.5 y_{t-1} + 0.2 y_{t-2} + 3 u_{t-1} + 10, with a varying input.
  local m = pr.narx { p = 2, q = 1, window = 30, ridge = 1e-6 }
  local y1, y2 = 100, 100
  local u = {}
  for t = 1, 60 do u[t] = 20 + 10 * math.sin(t * 0.7) + (t % 3) end
  for t = 1, 40 do
    local y = 0.5 * y1 + 0.2 * y2 + 3 * u[t] + 10
    if t > 2 then m:observe(y1, u[t]) end -- observe(y_{t-1}, u_{t-1}) order: y then its input
    y2, y1 = y1, y
  end
  -- The next value the model should predict is the one generated last (y1), from
  -- the inputs observed before it.
  T.near(m:predict(), y1, 1e-3 * y1)
end)

T.test('narx follows a trend that the last value misses', function()
  local m = pr.narx { p = 2, q = 0, window = 20, ridge = 1e-6 }
  for t = 1, 20 do m:observe(1000 - 10 * t) end
  T.near(m:predict(), 790, 1)
end)

T.test('narx predictions stay within half the smallest and twice the largest value seen', function()
  local m = pr.narx { p = 1, q = 0, window = 6, ridge = 0 }
  for _, y in ipairs { 1, 2, 4, 8, 16, 32, 64 } do m:observe(y) end
  local p = m:predict()
  T.ok(p > 0 and p <= 128, 'clamped, got ' .. p)
end)

T.test('narx checks its inputs', function()
  T.raises(function() pr.narx { p = 0, q = 0 } end, 'p + q must be at least 1')
  T.raises(function() pr.narx { p = 1.5 } end, 'p must be an integer')
  local m = pr.narx { q = 1 }
  T.raises(function() m:observe(1) end, 'u is needed')
  m:observe(1, { 2, 3 })
  T.raises(function() m:observe(1, { 2 }) end, 'earlier observations had 2')
end)

T.test('save and load reproduce the predictors', function()
  local e = pr.ewma { alpha = 0.3 }:observe(5):observe(9)
  local e2 = pr.load(e:save())
  T.eq(e2:predict(), e:predict())
  local m = pr.narx { p = 2, q = 1, window = 8 }
  for t = 1, 15 do m:observe(50 + (t * 7) % 11, t % 4) end
  local m2 = pr.load(m:save())
  T.near(m2:predict(), m:predict(), 1e-12)
  m:observe(55, 2)
  m2:observe(55, 2)
  T.near(m2:predict(), m:predict(), 1e-12)
  T.raises(function() pr.load { kind = 'lstm' } end, 'unknown predictor kind')
end)

return T
