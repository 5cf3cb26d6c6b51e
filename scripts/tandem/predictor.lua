-- tandem.predictor: one-step-ahead predictors of a worker's speed (samples/s), for
-- LB-BSP-style batching where each worker's batch is proportional to its predicted
-- speed for the next iteration.
--
--   ewma{alpha = 0.5}  s <- alpha*x + (1 - alpha)*s; cheap and steady, the default.
--   narx{p = 2, q = 1, window = 20, ridge = 0.01}
--       LB-BSP predicts with a NARX network (a recurrent model with exogenous
--       inputs). Here it is the linear NARX model
--           y_t = sum_{i=1..p} a_i y_{t-i} + sum_{j=1..q} b_j . u_{t-j} + c,
--       fitted by ridge least squares over the last `window` iterations: a network
--       would need far more data than a policy sees, and the linear model is what a
--       one-step predictor over a short window can identify. The paper does not
--       publish its lags; p = 2 lets the model follow a trend (a worker slowing
--       down over two iterations keeps slowing), q = 1 takes the driving factors of
--       the iteration just measured (u may be a number or an array: the batch the
--       worker ran, CPU or memory use). Columns are standardized before the ridge
--       penalty so the factors' units do not matter.
--       Until the window holds enough rows (features + 2) it predicts the last
--       value. Its predictions are clamped to [half the smallest, twice the largest]
--       value in the window: an autoregression fitted on 20 points can extrapolate
--       far, and a speed outside that range is not credible (it also keeps the
--       prediction positive).
--
-- Methods: observe(x [, u]), predict() (nil before any observation), save() and
-- predictor.load(state). A predictor is plain data with its methods in its class
-- (the metatable), so it can sit in a policy's state table and be saved as it is;
-- predictor.load gives a copied one its methods back.
local P = {}

local huge, abs, max, min = math.huge, math.abs, math.max, math.min

local function finite(v) return type(v) == 'number' and v == v and v > -huge and v < huge end

---------------------------------------------------------------------------------
local Ewma = {}
Ewma.__index = Ewma

function P.ewma(opts)
  local alpha = (opts or {}).alpha or 0.5
  if not finite(alpha) or alpha <= 0 or alpha > 1 then
    error('predictor.ewma: alpha must be in (0, 1], got ' .. tostring(alpha), 2)
  end
  return setmetatable({ kind = 'ewma', alpha = alpha }, Ewma)
end

function Ewma:observe(x)
  if not finite(x) then error('predictor.ewma:observe(x) needs a finite number, got ' .. tostring(x), 2) end
  self.value = self.value and (self.alpha * x + (1 - self.alpha) * self.value) or x
  return self
end

function Ewma:predict() return self.value end

function Ewma:save() return { kind = 'ewma', alpha = self.alpha, value = self.value } end

---------------------------------------------------------------------------------
local Narx = {}
Narx.__index = Narx

local function check_int(who, name, v, lo)
  if type(v) ~= 'number' or v ~= math.floor(v) or v < lo then
    error(string.format('%s: %s must be an integer >= %d, got %s', who, name, lo, tostring(v)), 3)
  end
end

function P.narx(opts)
  opts = opts or {}
  local self = setmetatable({ kind = 'narx', p = opts.p or 2, q = opts.q or 1, window = opts.window or 20,
                              ridge = opts.ridge or 0.01, y = {}, u = {} }, Narx)
  check_int('predictor.narx', 'p', self.p, 0)
  check_int('predictor.narx', 'q', self.q, 0)
  check_int('predictor.narx', 'window', self.window, 1)
  if self.p + self.q == 0 then error('predictor.narx: p + q must be at least 1 (there is nothing to regress on)', 2) end
  if not finite(self.ridge) or self.ridge < 0 then
    error('predictor.narx: ridge must be a non-negative number, got ' .. tostring(self.ridge), 2)
  end
  return self
end

-- Keeps the last window + max(p, q) observations (enough for `window` rows).
function Narx:observe(x, u)
  if not finite(x) then error('predictor.narx:observe(x, u) needs a finite x, got ' .. tostring(x), 2) end
  if type(u) == 'number' then u = { u } end
  if self.q > 0 then
    if type(u) ~= 'table' then
      error('predictor.narx:observe(x, u): this model has exogenous lags (q = ' .. self.q .. '), so u is needed '
            .. '(a number or an array of numbers)', 2)
    end
    self.dims = self.dims or #u
    if #u ~= self.dims then
      error(('predictor.narx:observe: u has %d entries, earlier observations had %d'):format(#u, self.dims), 2)
    end
  end
  local keep = self.window + max(self.p, self.q)
  local y, us = self.y, self.u
  y[#y + 1], us[#us + 1] = x, u or false
  if #y > keep then
    table.remove(y, 1)
    table.remove(us, 1)
  end
  return self
end

-- The regressors for predicting y[t] from what precedes it, written into f.
local function features(self, t, f)
  local c = 0
  for i = 1, self.p do
    c = c + 1
    f[c] = self.y[t - i]
  end
  for j = 1, self.q do
    local u = self.u[t - j]
    for d = 1, self.dims do
      c = c + 1
      f[c] = u[d]
    end
  end
end

-- Solves the k x k system A x = r in place (Gaussian elimination, partial
-- pivoting); nil when singular.
local function solve(A, r, k)
  for col = 1, k do
    local piv = col
    for row = col + 1, k do
      if abs(A[row][col]) > abs(A[piv][col]) then piv = row end
    end
    if abs(A[piv][col]) < 1e-12 then return nil end
    A[col], A[piv], r[col], r[piv] = A[piv], A[col], r[piv], r[col]
    for row = col + 1, k do
      local f = A[row][col] / A[col][col]
      for c = col, k do A[row][c] = A[row][c] - f * A[col][c] end
      r[row] = r[row] - f * r[col]
    end
  end
  local x = {}
  for row = k, 1, -1 do
    local s = r[row]
    for c = row + 1, k do s = s - A[row][c] * x[c] end
    x[row] = s / A[row][row]
  end
  return x
end

-- Fits on the window's rows and predicts the next value. The normal equations come
-- from running sums (no design matrix is built: a policy may hold a thousand of
-- these), centred and scaled to unit variance afterwards; a regressor that did not
-- vary over the window has no information and is left out.
function Narx:predict()
  local y, n = self.y, #self.y
  if n == 0 then return nil end
  local last = y[n]
  local k = self.p + self.q * (self.dims or 0)
  local first = max(max(self.p, self.q) + 1, n - self.window + 1)
  local rows = n - first + 1
  if rows < k + 2 then return last end
  local f, sf, sfy, sff = {}, {}, {}, {}
  for c = 1, k do
    sf[c], sfy[c], sff[c] = 0, 0, {}
    for d = 1, k do sff[c][d] = 0 end
  end
  local sy, lo, hi = 0, huge, -huge
  for t = first, n do
    features(self, t, f)
    local yt = y[t]
    sy = sy + yt
    lo, hi = min(lo, yt), max(hi, yt)
    for c = 1, k do
      local fc = f[c]
      sf[c], sfy[c] = sf[c] + fc, sfy[c] + fc * yt
      local row = sff[c]
      for d = c, k do row[d] = row[d] + fc * f[d] end
    end
  end
  local mean, sd = {}, {}
  for c = 1, k do
    mean[c] = sf[c] / rows
    local var = sff[c][c] / rows - mean[c] * mean[c]
    sd[c] = (var > 1e-12 * (mean[c] * mean[c] + 1e-300)) and math.sqrt(var) or 0
  end
  local ym = sy / rows
  local A, r = {}, {}
  for c = 1, k do
    A[c] = {}
    for d = 1, k do
      if sd[c] > 0 and sd[d] > 0 then
        local lo_cd, hi_cd = min(c, d), max(c, d)
        A[c][d] = (sff[lo_cd][hi_cd] - rows * mean[c] * mean[d]) / (sd[c] * sd[d])
      else
        A[c][d] = c == d and 1 or 0 -- a constant regressor: beta 0
      end
    end
    A[c][c] = A[c][c] + self.ridge * rows
    r[c] = sd[c] > 0 and (sfy[c] - rows * mean[c] * ym) / sd[c] or 0
  end
  local beta = solve(A, r, k)
  if not beta then return last end
  features(self, n + 1, f)
  local pred = ym
  for c = 1, k do
    if sd[c] > 0 then pred = pred + beta[c] * (f[c] - mean[c]) / sd[c] end
  end
  if pred ~= pred then return last end
  return min(max(pred, 0.5 * lo), 2 * hi)
end

function Narx:save()
  return { kind = 'narx', p = self.p, q = self.q, window = self.window, ridge = self.ridge, dims = self.dims,
           y = self.y, u = self.u }
end

---------------------------------------------------------------------------------

-- A predictor from its save().
function P.load(state)
  if type(state) ~= 'table' then error('predictor.load: expected a saved predictor table, got ' .. type(state), 2) end
  if state.kind == 'ewma' then
    local e = P.ewma { alpha = state.alpha }
    e.value = state.value
    return e
  elseif state.kind == 'narx' then
    local m = P.narx { p = state.p, q = state.q, window = state.window, ridge = state.ridge }
    m.dims = state.dims
    for t = 1, #state.y do m.y[t], m.u[t] = state.y[t], state.u[t] end
    return m
  end
  error("predictor.load: unknown predictor kind '" .. tostring(state.kind) .. "' (expected ewma or narx)", 2)
end

return P
