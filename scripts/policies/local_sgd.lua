-- local_sgd: local SGD, the baseline LBB compares with (its "local SGD" row: LBB
-- is 59% faster) and the usual low-communication alternative to BSP (Stich,
-- "Local SGD converges fast and communicates little", ICLR 2019; Lin et al.,
-- "Don't use large mini-batches, use local SGD", ICLR 2020). Every worker steps on
-- its own model for H iterations (mode 'local', local_steps = H), then the models
-- are averaged. A straggler still holds everyone back at each average, but only
-- once every H iterations instead of every iteration; the price is that the
-- models drift apart between averages.
--
-- The local batches are the equal split of the global batch (tandem's Plan.equal:
-- the first B mod N workers take one more), within the workers' bounds, at least
-- one sample each where the global batch allows (a worker without samples would
-- average an untrained model in). The plan is returned on the first call and after
-- that only when the plan in force differs from it; a returned plan is given
-- `wait` observations to show up in the stats before it is sent again.
--
-- Parameters (cluster.params), with defaults:
--   local_steps = 4     H, iterations between model averages
--
-- State: the sent plan's bookkeeping (tandem.sync_plan's sender), the one table
-- save() returns as it is and restore() takes back whole (from this policy only).
local util = require 'tandem.policy_util'
local sync_plan = require 'tandem.sync_plan'

local WHO = 'local_sgd'
local WAIT = 4 -- observations a returned plan gets to show up before it is re-sent

local policy = {}
local C, batches, local_steps -- init() sets them, nothing changes them
local state                   -- the sender: { policy, calls, sent_at }

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  local_steps = util.int_param(C.params, 'local_steps', 4, 1, nil, WHO)
  batches = util.equal_split(C.global_batch, util.solve_minima(C, WHO), C.max_batch)
  state = sync_plan.sender(WHO)
end

-- Whether the stats show this policy's plan in force (an engine that reports no
-- mode knows only bsp: there the batches are all it can show).
local function in_force(stats)
  if not util.same(util.batches(stats.workers), batches) then return false end
  return stats.mode == nil or stats.mode == 'local'
end

function policy.step(stats)
  local resent = sync_plan.due(state, in_force(stats), WAIT)
  if resent == nil then return nil end
  local plan = {}
  for i = 1, C.workers do plan[i] = batches[i] end
  return {
    local_batch = plan, mode = 'local', local_steps = local_steps,
    reason = ('local SGD: models averaged every %d iterations, equal batches of ~%d%s')
             :format(local_steps, batches[1], resent and ' (re-sent: the plan in force differs)' or ''),
  }
end

function policy.save() return state end

function policy.restore(saved)
  if sync_plan.is_sender(saved, WHO) then state = saved end
end

return policy
