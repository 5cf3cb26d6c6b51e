-- tandem.stragglers: straggler extent and static/dynamic classification.
local T = require 'tandem.testing'
local st = require 'tandem.stragglers'

local function workers(batches, times)
  local w = {}
  for i = 1, #batches do w[i] = { rank = i - 1, local_batch = batches[i], compute_ms = times[i] } end
  return w
end

T.test('extent is (max - min) / mean over workers that ran', function()
  local se, slow, fast = st.extent(workers({ 10, 10, 10, 10 }, { 100, 110, 90, 100 }))
  T.near(se, 0.2, 1e-12)
  T.eq(slow, 2)
  T.eq(fast, 3)
  -- A dropped worker (batch 0, ~0 ms) is not the fastest.
  se, slow, fast = st.extent(workers({ 0, 10, 10 }, { 0.001, 100, 120 }))
  T.near(se, 20 / 110, 1e-12)
  T.eq(fast, 2)
  T.eq(st.extent(workers({ 10 }, { 5 })), 0)
  T.eq(st.extent(workers({ 10, 10 }, { 50, 50 })), 0)
end)

-- A window of `len` entries; speed(i, k) in samples per ms for worker i at entry k.
local function history(n, len, speed)
  local h = {}
  for k = 1, len do
    local b, t = {}, {}
    for i = 1, n do b[i], t[i] = 60, 60 / speed(i, k) end
    h[k] = { iteration = k - 1, workers = workers(b, t) }
  end
  return h
end

T.test('a persistently slower device is static', function()
  local labels = st.classify(history(4, 20, function(i) return i == 4 and 0.4 or 1 end))
  T.eq(labels, { [4] = 'static' })
end)

T.test('a worker that just slowed down is dynamic, and static once it lasts', function()
  local function speed(i, k) return (i == 2 and k > 17) and 0.3 or 1 end
  T.eq(st.classify(history(4, 20, speed)), { [2] = 'dynamic' })
  local function lasting(i, k) return (i == 2 and k > 6) and 0.3 or 1 end
  T.eq(st.classify(history(4, 20, lasting)), { [2] = 'static' })
end)

T.test('a slow device that slows further is dynamic; a past blip is nothing', function()
  local function speed(i, k)
    if i == 3 then return k > 18 and 0.2 or 0.5 end
    if i == 1 and k == 5 then return 0.1 end
    return 1
  end
  T.eq(st.classify(history(4, 20, speed)), { [3] = 'dynamic' })
end)

T.test('classify honours its thresholds and skips workers that did not run', function()
  local h = history(3, 10, function(i) return i == 3 and 0.7 or 1 end)
  T.eq(st.classify(h), { [3] = 'static' })
  T.eq(st.classify(h, { slow = 0.6 }), {})
  for k = 1, 10 do h[k].workers[3].local_batch, h[k].workers[3].compute_ms = 0, 0 end
  T.eq(st.classify(h), {})
  T.eq(st.classify({}), {})
  T.raises(function() st.classify(h, { slow = 'x' }) end, 'opts.slow must be a number')
end)

return T
