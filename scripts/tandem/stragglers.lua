-- tandem.stragglers: how uneven the workers are (LBB's straggler extent) and which
-- ones are stragglers, and of which kind (BOA's static/dynamic distinction).
--
-- extent(workers) is SE = (max - min) / mean of compute_ms over the workers with
-- local_batch > 0 (a dropped worker computes nothing and is no straggler). Raw times,
-- not per sample: balancing aims at equal compute times, and a per-sample measure
-- would flag a worker that was given a small batch on purpose.
--
-- classify(history, opts) labels each worker from its speed, samples per ms of
-- compute, over the history window:
--   'static'  slow compared with the others (below opts.slow = 0.8 of the median
--             speed of that iteration) in at least opts.persist = 0.7 of the window's
--             iterations it ran: a slower device, persistently;
--   'dynamic' slow compared with itself: its mean speed over the last opts.recent = 3
--             iterations below (1 - opts.drop) = 0.8 of its own median over the window
--             (which must hold more than opts.recent entries): contention or an
--             injected slowdown, transient until it has lasted half the window (then
--             its median moves down, and it becomes static if it is slower than the
--             others);
--   nil       neither.
-- 'dynamic' wins over 'static': a slow device that just became slower needs its
-- model refreshed, which is what a policy does about a dynamic straggler.
local S = {}

local huge = math.huge

-- compute_ms of the workers with local_batch > 0, and their ranks (1-based).
local function active_times(workers)
  local t, who = {}, {}
  for i = 1, #workers do
    local w = workers[i]
    if w.local_batch > 0 then t[#t + 1], who[#who + 1] = w.compute_ms, i end
  end
  return t, who
end

-- SE, then the (1-based) indices of the slowest and fastest active worker. SE is 0
-- with fewer than two active workers or a zero mean.
function S.extent(workers)
  local t, who = active_times(workers)
  if #t < 2 then return 0, who[1], who[1] end
  local lo, hi, sum, slow, fast = huge, -huge, 0, nil, nil
  for k = 1, #t do
    if t[k] > hi then hi, slow = t[k], who[k] end
    if t[k] < lo then lo, fast = t[k], who[k] end
    sum = sum + t[k]
  end
  if sum <= 0 then return 0, slow, fast end
  return (hi - lo) / (sum / #t), slow, fast
end

local function median(xs)
  local n = #xs
  if n == 0 then return nil end
  table.sort(xs)
  if n % 2 == 1 then return xs[(n + 1) / 2] end
  return 0.5 * (xs[n / 2] + xs[n / 2 + 1])
end

local function opt(opts, key, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= v then
    error(('stragglers.classify: opts.%s must be a number, got %s'):format(key, tostring(v)), 3)
  end
  return v
end

-- history: array of { iteration, workers } oldest first (stats.history). Returns
-- labels, indexed by worker (1-based), 'static' | 'dynamic' | nil.
function S.classify(history, opts)
  if type(history) ~= 'table' then
    error('stragglers.classify(history, opts): history must be the array of stats entries, got ' .. type(history), 2)
  end
  opts = opts or {}
  local slow, persist = opt(opts, 'slow', 0.8), opt(opts, 'persist', 0.7)
  local drop, recent = opt(opts, 'drop', 0.2), opt(opts, 'recent', 3)
  local labels = {}
  local W = #history
  if W == 0 then return labels end
  local n = #history[W].workers
  -- speed[k][i]: samples per ms of worker i at entry k, nil when it did not run.
  local speed, slow_count, ran = {}, {}, {}
  for i = 1, n do slow_count[i], ran[i] = 0, 0 end
  for k = 1, W do
    local row, all = {}, {}
    local workers = history[k].workers
    for i = 1, n do
      local w = workers[i]
      if w and w.local_batch > 0 and w.compute_ms > 0 then
        row[i] = w.local_batch / w.compute_ms
        all[#all + 1] = row[i]
      end
    end
    local mid = median(all)
    for i = 1, n do
      if row[i] then
        ran[i] = ran[i] + 1
        if row[i] < slow * mid then slow_count[i] = slow_count[i] + 1 end
      end
    end
    speed[k] = row
  end
  local first_recent = math.max(1, W - recent + 1)
  for i = 1, n do
    if ran[i] > 0 then
      local own, rsum, rn = {}, 0, 0
      for k = 1, W do
        local v = speed[k][i]
        if v then
          own[#own + 1] = v
          if k >= first_recent then rsum, rn = rsum + v, rn + 1 end
        end
      end
      local base = median(own)
      if rn > 0 and W > recent and rsum / rn < (1 - drop) * base then
        labels[i] = 'dynamic'
      elseif slow_count[i] >= persist * ran[i] then
        labels[i] = 'static'
      end
    end
  end
  return labels
end

return S
