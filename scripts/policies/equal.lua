-- equal: plain synchronous SGD, the baseline every paper compares with (BOA, LBB
-- and LB-BSP call it SSGD/BSP): the global batch split as evenly as the workers'
-- bounds allow (lower ranks take the remainder), decided once and then kept.
--
-- Parameters: none.
--
-- save()/restore(): whether the split was handed out, so a swap back to equal
-- mid-run re-issues it only if it never did.
local util = require 'tandem.policy_util'

local policy = {}
local plan, done

function policy.init(cluster)
  local c = util.read_cluster(cluster, 'equal')
  plan = util.equal_split(c.global_batch, c.min_batch, c.max_batch)
  done = false
end

function policy.step(stats)
  if done then return nil end
  done = true
  if util.same(util.batches(stats.workers), plan) then return nil end
  return { local_batch = plan, reason = 'equal split of the global batch' }
end

function policy.save() return { policy = 'equal', done = done } end

function policy.restore(state)
  if type(state) == 'table' and state.policy == 'equal' then done = state.done == true end
end

return policy
