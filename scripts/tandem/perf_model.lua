-- tandem.perf_model: per-worker time models t(b), the compute time in ms (forward +
-- backward) a worker needs for a local batch of b samples.
--
-- BOA fits "hardware-agnostic" models from measurements; LBB refits a linear model
-- from the latest observation during training; LB-BSP observes that GPU time is
-- piecewise linear in the batch, flat while the GPU is not saturated. Two forms
-- cover them:
--   linear{window = 20}     t(b) = a*b + c by least squares over a sliding window of
--                           (b, ms) observations;
--   piecewise{points = ...} t(b) = max(flat, a*b + c), fitted from a warm-up profile;
--                           in training it keeps the profile's shape and scales it
--                           to the recent observations.
-- Both are convex and nondecreasing for b >= 1, so the min-max allocation
-- (tandem.minmax) needs one LP row per linear piece (m:pieces()).
--
-- t(0) = 0: a worker given no samples computes nothing (the engine reports
-- compute_ms ~ 0 for it), so a solve may drop a worker whose fixed cost alone exceeds
-- what the others need. Observations with b <= 0 carry no information and are
-- ignored. The models are nondecreasing in b (t(0) = 0 <= c), which is all the exact
-- integer finish in tandem.minmax relies on.
--
-- Common methods: observe(b, ms), fit(), ready(), predict(b), inverse(T) (largest
-- real b >= 0 with predict(b) <= T; -inf when T < 0), pieces(), refit_latest(b, ms)
-- (LBB's rapid-tune), save() -> plain data, and perf_model.load(state).
-- predict/inverse/pieces refit first when observations arrived since the last fit.
--
-- A model is a table of plain data whose methods live in its class (the
-- metatable), never in closures: a policy keeps its models inside its state table
-- and saves them as they are (the engine copies the data and leaves the metatable
-- behind); perf_model.load gives a copied model its methods back.
local M = {}

local huge, max, floor = math.huge, math.max, math.floor

local function finite(v) return type(v) == 'number' and v == v and v > -huge and v < huge end

-- A ring of the last `size` (b, ms) pairs.
local function ring(size) return { size = size, n = 0, head = 0, b = {}, ms = {} } end

local function ring_push(r, b, ms)
  r.head = r.head % r.size + 1
  r.b[r.head], r.ms[r.head] = b, ms
  if r.n < r.size then r.n = r.n + 1 end
end

local function ring_clear(r) r.n, r.head, r.b, r.ms = 0, 0, {}, {} end

-- The ring as plain data (for save()), in its own layout, so a loaded model sums
-- its window in the same order and fits to the same last bit.
local function ring_save(r)
  local bs, mss = {}, {}
  for k = 1, r.n do bs[k], mss[k] = r.b[k], r.ms[k] end
  return { size = r.size, n = r.n, head = r.head, b = bs, ms = mss }
end

local function ring_load(saved)
  local r = ring(saved.size)
  r.n, r.head = saved.n, saved.head
  for k = 1, saved.n do r.b[k], r.ms[k] = saved.b[k], saved.ms[k] end
  return r
end

local function check_observation(who, b, ms)
  if not finite(b) or not finite(ms) then
    error(string.format('%s:observe(b, ms) needs two finite numbers, got %s, %s', who, tostring(b), tostring(ms)), 3)
  end
  return b > 0 and ms > 0
end

---------------------------------------------------------------------------------
-- linear: t(b) = a*b + c over a sliding window.
--
-- Plain least squares breaks down in exactly the situation balancing creates: once
-- a plan settles, every observation in the window has the same b (or b's a few
-- samples apart), and the slope is noise. So the slope is ridge-regularized towards
-- a prior: the previous fit's slope, or before any fit the proportional slope
-- mean(ms)/mean(b) (c = 0, time proportional to the batch). The prior weighs as much
-- as the window's points spread by prior_spread (5%) of the mean batch would, so
-- plans that differ by a few samples barely move it, while a window spread over a
-- real change of batch dominates (batches spread by half their mean bias the slope
-- by about 1%). A fit whose slope comes out below 10% of the proportional one says
-- more about noise than about the device (time does not fall as the batch grows,
-- and a nearly flat line with a large intercept would make the solve strip the
-- worker to its minimum): it keeps the prior slope instead. A negative intercept
-- (a one-sample batch taking negative time) falls back to the proportional model.
local Linear = {}
Linear.__index = Linear

function M.linear(opts)
  opts = opts or {}
  local window = opts.window or 20
  if type(window) ~= 'number' or window < 1 or window ~= floor(window) then
    error('perf_model.linear: window must be a positive integer, got ' .. tostring(window), 2)
  end
  return setmetatable({ kind = 'linear', window = window, prior_spread = opts.prior_spread or 0.05,
                        obs = ring(window), dirty = false }, Linear)
end

function Linear:observe(b, ms)
  if check_observation('perf_model.linear', b, ms) then
    ring_push(self.obs, b, ms)
    self.dirty = true
  end
  return self
end

function Linear:ready() return self.a ~= nil or self.obs.n > 0 end

function Linear:fit()
  self.dirty = false
  local r = self.obs
  local n = r.n
  if n == 0 then return self end
  local sb, sm = 0, 0
  for k = 1, n do sb, sm = sb + r.b[k], sm + r.ms[k] end
  local mb, mm = sb / n, sm / n
  local sxx, sxy = 0, 0
  for k = 1, n do
    local db = r.b[k] - mb
    sxx, sxy = sxx + db * db, sxy + db * (r.ms[k] - mm)
  end
  local proportional = mm / mb
  local prior = self.a or proportional
  local lambda = n * (self.prior_spread * mb) ^ 2
  local a = (sxy + lambda * prior) / (sxx + lambda)
  if a < 0.1 * proportional then a = max(prior, 0.1 * proportional) end
  local c = mm - a * mb
  if c < 0 then a, c = proportional, 0 end
  self.a, self.c = a, c
  return self
end

local function current(m)
  if m.dirty then m:fit() end
  if m.a == nil then
    error('perf_model.' .. m.kind .. ': no observation yet; observe(b, ms) at least once before predicting', 3)
  end
  return m
end

function Linear:predict(b)
  current(self)
  if b <= 0 then return 0 end
  return self.a * b + self.c
end

function Linear:inverse(T)
  current(self)
  if T < 0 then return -huge end
  return max(0, (T - self.c) / self.a)
end

function Linear:pieces()
  current(self)
  return { { a = self.a, c = self.c } }
end

-- LBB's rapid-tune: the window held observations from before a speed change, so it
-- is dropped; the model keeps its shape (the ratio of slope to intercept) scaled to
-- pass through the latest observation, which the new window starts from.
function Linear:refit_latest(b, ms)
  if not check_observation('perf_model.linear', b, ms) then return self end
  if self:ready() then
    local f = ms / current(self):predict(b)
    self.a, self.c = self.a * f, self.c * f
  end
  ring_clear(self.obs)
  return self:observe(b, ms)
end

function Linear:save()
  return { kind = 'linear', window = self.window, prior_spread = self.prior_spread, a = self.a, c = self.c,
           obs = ring_save(self.obs), dirty = self.dirty }
end

---------------------------------------------------------------------------------
-- piecewise: t(b) = scale * max(flat, a*b + c), the shape from a warm-up profile.
--
-- The knee is chosen by least squares: for each split of the profile sorted by b,
-- the points left of it set flat (their mean) and those right of it a and c; the
-- split whose model max(flat, a*b + c) has the smallest squared error over all
-- points wins (the split with nothing on the left is the plain linear model). A
-- profile is a few to a few dozen points, so the O(n^2) search is cheap. During
-- training one worker's batch hardly varies, which cannot re-identify a knee, so
-- observations only set the scale: the mean ratio of observed to profiled time over
-- a short window (5), the latest observation alone after refit_latest.
local Piecewise = {}
Piecewise.__index = Piecewise

-- Least-squares line through points k..n of sorted (bs, mss); nil when their b's
-- do not differ.
local function line(bs, mss, k, n)
  local cnt, sb, sm = n - k + 1, 0, 0
  for j = k, n do sb, sm = sb + bs[j], sm + mss[j] end
  local mb, mm = sb / cnt, sm / cnt
  local sxx, sxy = 0, 0
  for j = k, n do
    sxx, sxy = sxx + (bs[j] - mb) ^ 2, sxy + (bs[j] - mb) * (mss[j] - mm)
  end
  if sxx <= 1e-12 * mb * mb then return nil end
  local a = sxy / sxx
  return a, mm - a * mb
end

local function fit_profile(points)
  local sorted = {}
  for k, p in ipairs(points) do
    local b, ms = p.b or p[1], p.ms or p[2]
    if not finite(b) or not finite(ms) or b <= 0 or ms <= 0 then
      error(string.format('perf_model.piecewise: profile point %d must be {b, ms} (or {b = , ms = }) with positive '
                          .. 'numbers, got %s, %s', k, tostring(b), tostring(ms)), 3)
    end
    sorted[k] = { b, ms }
  end
  table.sort(sorted, function(p, q) return p[1] < q[1] end)
  local bs, mss, n = {}, {}, #sorted
  for k = 1, n do bs[k], mss[k] = sorted[k][1], sorted[k][2] end
  if n < 2 or bs[1] == bs[n] then
    error('perf_model.piecewise: the profile needs points at two or more batch sizes; time the worker at a few '
          .. 'batch sizes (e.g. 8, 16, ..., its memory cap) during warm-up', 3)
  end
  local best
  local left = 0 -- sum of ms over the flat part
  for split = 0, n - 2 do
    if split > 0 then left = left + mss[split] end
    local a, c = line(bs, mss, split + 1, n)
    -- Without a flat part the line itself must not go negative at small batches.
    if a and a > 0 and (split > 0 or c >= 0) then
      local flat = split > 0 and left / split or 0
      local sse = 0
      for j = 1, n do sse = sse + (max(flat, a * bs[j] + c) - mss[j]) ^ 2 end
      if not best or sse < best.sse then best = { sse = sse, flat = flat, a = a, c = c } end
    end
  end
  if not best then
    -- Time does not grow with the batch anywhere in the profile: take it as
    -- proportional to the batch through the mean point, the assumption that
    -- overloads no one.
    local sb, sm = 0, 0
    for k = 1, n do sb, sm = sb + bs[k], sm + mss[k] end
    best = { flat = 0, a = sm / sb, c = 0 }
  end
  return best.flat, best.a, best.c
end

function M.piecewise(opts)
  if type(opts) ~= 'table' or type(opts.points) ~= 'table' then
    error('perf_model.piecewise{points = {{b, ms}, ...}}: the warm-up profile is required', 2)
  end
  local window = opts.window or 5
  if type(window) ~= 'number' or window < 1 or window ~= floor(window) then
    error('perf_model.piecewise: window must be a positive integer, got ' .. tostring(window), 2)
  end
  local flat, a, c = fit_profile(opts.points)
  return setmetatable({ kind = 'piecewise', window = window, flat = flat, a = a, c = c, scale = 1,
                        obs = ring(window), dirty = false }, Piecewise)
end

local function shape(m, b) return max(m.flat, m.a * b + m.c) end

function Piecewise:observe(b, ms)
  if check_observation('perf_model.piecewise', b, ms) then
    ring_push(self.obs, b, ms)
    self.dirty = true
  end
  return self
end

function Piecewise:ready() return true end

function Piecewise:fit()
  self.dirty = false
  local r = self.obs
  if r.n == 0 then return self end
  local s = 0
  for k = 1, r.n do s = s + r.ms[k] / shape(self, r.b[k]) end
  self.scale = s / r.n
  return self
end

function Piecewise:predict(b)
  if self.dirty then self:fit() end
  if b <= 0 then return 0 end
  return self.scale * shape(self, b)
end

function Piecewise:inverse(T)
  if self.dirty then self:fit() end
  if T < 0 then return -huge end
  local t = T / self.scale
  if t < self.flat then return 0 end
  return max(0, (t - self.c) / self.a)
end

function Piecewise:pieces()
  if self.dirty then self:fit() end
  local out = { { a = self.scale * self.a, c = self.scale * self.c } }
  if self.flat > 0 then out[2] = { a = 0, c = self.scale * self.flat } end
  return out
end

function Piecewise:refit_latest(b, ms)
  if not check_observation('perf_model.piecewise', b, ms) then return self end
  ring_clear(self.obs)
  return self:observe(b, ms)
end

function Piecewise:save()
  return { kind = 'piecewise', window = self.window, flat = self.flat, a = self.a, c = self.c, scale = self.scale,
           obs = ring_save(self.obs), dirty = self.dirty }
end

---------------------------------------------------------------------------------
-- Micro-batches (issue 37). A worker whose memory holds `cap` samples at once may
-- still take more: it computes b samples in k = ceil(b / cap) micro-batches (the
-- engine's split: sizes within one of each other), each a pass that pays the pass's
-- fixed cost. The models above are of one pass; a step of b samples in k passes is
--     t(b) = k * t1(b / k),   k = ceil(b / cap),
-- k times the fixed cost where one pass of b would pay it once. t is nondecreasing
-- in b (t1 is, and a further pass adds a fixed cost), which is all tandem.minmax's
-- exact finish needs, so the min-max over these models chooses every worker's local
-- batch and, with it, its micro-batches.
--
-- Observing: a step of b samples in k micro-batches that took ms is k passes of b/k
-- samples, each ms/k: observe_step feeds the one-pass model that (the worker's
-- micro_batches, from its stats).

-- The micro-batches b samples take under a cap: ceil(b / cap), 1 for b <= cap.
function M.micro_count(b, cap)
  if b <= cap then return 1 end
  return math.ceil(b / cap)
end

local MicroBatched = {}
MicroBatched.__index = MicroBatched

-- The model of a worker holding at most `cap` samples at once, over its one-pass
-- model; at most `max_micro` micro-batches (the engine's 1024).
function M.micro_batched(model, cap, max_micro)
  if type(model) ~= 'table' or type(model.predict) ~= 'function' then
    error('perf_model.micro_batched: expected a time model, got ' .. type(model), 2)
  end
  if not finite(cap) or cap < 1 then error('perf_model.micro_batched: cap must be a number >= 1, got ' .. tostring(cap), 2) end
  return setmetatable({ base = model, cap = floor(cap), max_micro = max_micro or 1024 }, MicroBatched)
end

function MicroBatched:micro(b) return M.micro_count(b, self.cap) end

function MicroBatched:predict(b)
  if b <= 0 then return 0 end
  local k = self:micro(b)
  return k * self.base:predict(b / k)
end

-- The largest b with predict(b) <= T: the whole passes of cap samples that fit in T,
-- then how far one more pass (every pass then holding b / (k + 1)) reaches.
function MicroBatched:inverse(T)
  if T < 0 then return -huge end
  local cap, base = self.cap, self.base
  local full = base:predict(cap)
  if not (full > 0) then return cap * self.max_micro end
  local k = math.min(floor(T / full), self.max_micro)
  if k >= self.max_micro then return cap * self.max_micro end
  if k == 0 then return math.min(cap, base:inverse(T)) end
  local more = (k + 1) * base:inverse(T / (k + 1))
  return max(k * cap, math.min((k + 1) * cap, more))
end

-- Lines below t on b >= 1, for the LP bound: for each one-pass piece a*x + c, k passes
-- of b/k give a*b + k*c >= a*b + c (c >= 0) and, with k >= b / cap, >= (a + c/cap)*b.
function MicroBatched:pieces()
  local out = {}
  for _, p in ipairs(self.base:pieces()) do
    if p.c >= 0 then
      out[#out + 1] = { a = p.a, c = p.c }
      out[#out + 1] = { a = p.a + p.c / self.cap, c = 0 }
    else  -- k <= b/cap + 1: a*b + k*c >= (a + c/cap)*b + c
      out[#out + 1] = { a = p.a + p.c / self.cap, c = p.c }
    end
  end
  return out
end

-- Feeds `model` (one pass) a step of b samples in k micro-batches that took ms.
function M.observe_step(model, b, ms, k)
  k = (type(k) == 'number' and k >= 1) and floor(k) or 1
  return model:observe(b / k, ms / k)
end

---------------------------------------------------------------------------------

-- A model from its save().
function M.load(state)
  if type(state) ~= 'table' then error('perf_model.load: expected a saved model table, got ' .. type(state), 2) end
  local m
  if state.kind == 'linear' then
    m = setmetatable({ kind = 'linear', window = state.window, prior_spread = state.prior_spread, a = state.a,
                       c = state.c }, Linear)
  elseif state.kind == 'piecewise' then
    m = setmetatable({ kind = 'piecewise', window = state.window, flat = state.flat, a = state.a, c = state.c,
                       scale = state.scale }, Piecewise)
  else
    error("perf_model.load: unknown model kind '" .. tostring(state.kind) .. "' (expected linear or piecewise)", 2)
  end
  m.obs = ring_load(state.obs)
  m.dirty = state.dirty == true
  return m
end

return M
