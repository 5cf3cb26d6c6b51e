-- A probe policy for tools/bench/policy_bench.cpp: each step fits one linear model
-- per worker to its latest observation and solves the min-max allocation with
-- tandem.minmax, timing the solve alone (global solve_ms) apart from the stats
-- table the engine builds.
local minmax = require 'tandem.minmax'
local perf_model = require 'tandem.perf_model'

local P = {}

function P.init(cluster)
  P.cluster = cluster
  P.models = {}
  for i = 1, cluster.workers do P.models[i] = perf_model.linear { window = 8 } end
end

function P.step(stats)
  for i, w in ipairs(stats.workers) do
    if w.local_batch > 0 then P.models[i]:observe(w.local_batch, w.compute_ms) end
  end
  local start = os.clock()
  local batches = minmax.solve(P.models, stats.global_batch, P.cluster.min_batch, P.cluster.max_batch)
  solve_ms = (os.clock() - start) * 1000  -- luacheck: ignore (read by the benchmark)
  return { local_batch = batches, reason = 'probe' }
end

return P
