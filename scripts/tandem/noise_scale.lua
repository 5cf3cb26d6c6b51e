-- tandem.noise_scale: the gradient noise scale B_noise = tr(Sigma) / |G|^2 measured
-- in training (McCandlish et al. 2018, "An Empirical Model of Large-Batch
-- Training", appendix A: the estimator from two batch sizes). Sigma is the
-- per-sample gradient covariance and G the true gradient; B_noise is the batch size
-- at which the noise in a mean gradient is as large as the gradient itself, so a
-- step of B samples is worth about 1 / (1 + B_noise / B) of an ideal step. star
-- weighs synchronisation modes with it, goodput chooses the global batch by it.
--
-- One bsp observation gives both batch sizes at once: B_small = B / n (n workers
-- with samples), |G_small|^2 = the batch-weighted mean of the workers' grad_sq (its
-- expected value is |G|^2 + tr(Sigma) / B_small exactly, for uneven batches too),
-- B_big = B, |G_big|^2 = global_grad_sq. Then
--   |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
--   tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)
-- B is each observation's own: the sum of the local batches the norms were
-- measured over, which must be the plan's global batch, stats.global_batch, when
-- the stats carry it (a policy may change B from one plan to the next). Each of the two is smoothed by its
-- own EWMA and B_noise is the ratio of the smoothed values: the ratio of single
-- noisy estimates is biased (McCandlish et al.), and |G|^2 alone is a small
-- difference of two large numbers when B << B_noise, often negative. The EWMA
-- starts at the first estimate (star's, whose B does not change). With
-- weighted = true (for a policy that moves B) it is a weighted, bias-corrected
-- EWMA instead: each average is sum(decay * weight * estimate) / sum(decay *
-- weight), decay (1 - alpha)^age, so no single early estimate stays in charge
-- (Adam's correction; AdaptDL's for this estimator), and |G|^2's estimates weigh
-- B^2: far below B_noise their spread is ~ tr(Sigma) / B (B |G_B|^2 spreads by
-- ~ tr(Sigma) whatever B, and the difference is divided by ~B), so an estimate at
-- 4B is worth 16 at B; tr(Sigma)'s spread does not depend on B (weight 1).
--
-- b_noise(B, prior) clamps to [1e-6 B, 1e6 B] (B: the caller's reference batch); a
-- non-positive smoothed |G|^2 means the noise dominates (the upper end), a
-- non-positive tr(Sigma) that there is none (the lower end). Before any estimate it
-- returns `prior`.
--
-- Only bsp observations count (stats.mode nil or 'bsp'; other modes report no
-- global norm), and only those whose norms are all finite and non-negative, with at
-- least two workers holding samples. An estimate that still comes out infinite or
-- NaN (norms near the largest double) is dropped: in an EWMA it would stay forever.
--
-- An estimator is plain data with its methods in its class (the metatable), so it
-- lives in a policy's state table and is saved as it is; noise_scale.load gives a
-- copied one its methods back. Fields: alpha, weighted, g2 and trace (the
-- smoothed |G|^2 and tr(Sigma), nil before the first estimate), estimates (how
-- many were taken); weighted ones also the sums behind g2 and trace (sums = {g2,
-- g2_weight, trace, trace_weight}).
local M = {}

local huge = math.huge

local function finite(v) return type(v) == 'number' and v == v and v > -huge and v < huge end
local function norm(v) return finite(v) and v >= 0 end

local Estimator = {}
Estimator.__index = Estimator

-- opts.alpha: the EWMA weight of the newest estimate of each of |G|^2 and tr(Sigma);
-- opts.weighted: the weighted, bias-corrected averages (see the header).
function M.new(opts)
  opts = opts or {}
  local alpha = opts.alpha or 0.1
  if not finite(alpha) or alpha <= 0 or alpha > 1 then
    error('noise_scale.new: alpha must be in (0, 1], got ' .. tostring(alpha), 2)
  end
  return setmetatable({ kind = 'noise_scale', alpha = alpha, weighted = opts.weighted == true, estimates = 0 },
                      Estimator)
end

local function ewma(old, x, a) return old and (a * x + (1 - a) * old) or x end

-- The two-batch-size estimate of one observation's stats ({ mode, global_grad_sq,
-- workers[i] = { local_batch, grad_sq } }): |G|^2, tr(Sigma) and B; nil when it
-- carries none.
function M.estimate(stats)
  if (stats.mode or 'bsp') ~= 'bsp' then return nil end
  local big = stats.global_grad_sq
  if not norm(big) or type(stats.workers) ~= 'table' then return nil end
  local sum_b, sum_bg, n = 0, 0, 0
  for i = 1, #stats.workers do
    local w = stats.workers[i]
    local b, g = w.local_batch or 0, w.grad_sq
    if b > 0 then
      if not norm(g) then return nil end
      sum_b, sum_bg, n = sum_b + b, sum_bg + b * g, n + 1
    end
  end
  if n < 2 then return nil end
  -- The global norm was measured over the plan's B: stats that do not add up to it
  -- (a report missing) would pair it with the wrong batch sizes.
  if stats.global_batch ~= nil and stats.global_batch ~= sum_b then return nil end
  local b_big, b_small = sum_b, sum_b / n
  local small = sum_bg / sum_b
  local g2 = (b_big * big - b_small * small) / (b_big - b_small)
  local trace = (small - big) / (1 / b_small - 1 / b_big)
  if not finite(g2) or not finite(trace) then return nil end
  return g2, trace, b_big
end

-- Takes one observation's estimate into the smoothed values; true when it held one.
function Estimator:observe(stats)
  local g2, trace, B = M.estimate(stats)
  if not g2 then return false end
  if self.weighted then
    local keep, a, old = 1 - self.alpha, self.alpha, self.sums or { g2 = 0, g2_weight = 0, trace = 0, trace_weight = 0 }
    local sums = { g2 = keep * old.g2 + a * B * B * g2, g2_weight = keep * old.g2_weight + a * B * B,
                   trace = keep * old.trace + a * trace, trace_weight = keep * old.trace_weight + a }
    -- (Batches and norms near the largest double overflow the sums: no estimate.)
    if not finite(sums.g2) or not finite(sums.g2_weight) or sums.g2_weight <= 0 then return false end
    self.sums, self.g2, self.trace = sums, sums.g2 / sums.g2_weight, sums.trace / sums.trace_weight
  else
    self.g2 = ewma(self.g2, g2, self.alpha)
    self.trace = ewma(self.trace, trace, self.alpha)
  end
  self.estimates = self.estimates + 1
  return true
end

function Estimator:ready() return self.g2 ~= nil end

-- The smoothed B_noise, clamped to [1e-6 B, 1e6 B]; `prior` before any estimate.
function Estimator:b_noise(B, prior)
  if not self.g2 then return prior end
  local lo, hi = 1e-6 * B, 1e6 * B
  if self.trace <= 0 then return lo end
  if self.g2 <= 0 then return hi end
  return math.min(hi, math.max(lo, self.trace / self.g2))
end

function Estimator:save()
  local sums = self.sums and { g2 = self.sums.g2, g2_weight = self.sums.g2_weight, trace = self.sums.trace,
                               trace_weight = self.sums.trace_weight }
  return { kind = 'noise_scale', alpha = self.alpha, weighted = self.weighted, g2 = self.g2, trace = self.trace,
           estimates = self.estimates, sums = sums }
end

-- A saved estimator (a copy of one: its data without the metatable) with its
-- methods back. `alpha` is taken where the saved one has none (a state saved
-- before estimators carried it).
function M.load(saved, alpha)
  if type(saved) ~= 'table' then error('noise_scale.load: expected a saved estimator table, got ' .. type(saved), 2) end
  local e = M.new { alpha = saved.alpha or alpha, weighted = saved.weighted }
  if saved.g2 ~= nil or saved.trace ~= nil then
    if not finite(saved.g2) or not finite(saved.trace) then
      error('noise_scale.load: the saved g2 and trace must be finite numbers, got ' .. tostring(saved.g2) .. ', '
            .. tostring(saved.trace), 2)
    end
    e.g2, e.trace = saved.g2, saved.trace
  end
  local sums = saved.sums
  if e.weighted and e.g2 ~= nil then
    if type(sums) ~= 'table' or not finite(sums.g2) or not finite(sums.g2_weight) or not finite(sums.trace)
       or not finite(sums.trace_weight) or sums.g2_weight <= 0 or sums.trace_weight <= 0 then
      error('noise_scale.load: a weighted estimator needs its sums {g2, g2_weight, trace, trace_weight}', 2)
    end
    e.sums = { g2 = sums.g2, g2_weight = sums.g2_weight, trace = sums.trace, trace_weight = sums.trace_weight }
  end
  e.estimates = tonumber(saved.estimates) or 0
  return e
end

return M
