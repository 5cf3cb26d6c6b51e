-- equal: plain synchronous SGD, the baseline every paper compares with (BOA, LBB
-- and LB-BSP call it SSGD/BSP): the global batch split as evenly as the workers'
-- bounds allow (lower ranks take the remainder), decided once and then kept. A
-- share above a worker's cap (cluster.max_batch: its largest micro-batch) is computed
-- in micro-batches.
--
-- Parameters: none.
--
-- State: whether the split was handed out, so a swap back to equal mid-run
-- re-issues it only if it never did. It lives in one table, `state`, which save()
-- returns as it is and restore() takes back whole (from equal only).
local util = require 'tandem.policy_util'

local WHO = 'equal'
local policy = {}
local plan  -- the equal split: init() computes it, nothing changes it
local micro -- its micro-batches where a share exceeds a worker's cap (nil: none)
local state -- { policy, done }

function policy.init(cluster)
  local c = util.read_cluster(cluster, WHO)
  plan = util.equal_split(c.global_batch, c.min_batch, c.local_max)
  micro = util.micro_batches(plan, c.max_batch)
  state = { policy = WHO, done = false }
end

function policy.step(stats)
  if state.done then return nil end
  state.done = true
  if util.same(util.batches(stats.workers), plan) then return nil end
  return { local_batch = plan, micro_batches = micro, reason = 'equal split of the global batch' }
end

function policy.save() return state end

function policy.restore(saved)
  if type(saved) == 'table' and saved.policy == WHO and type(saved.done) == 'boolean' then state = saved end
end

return policy
