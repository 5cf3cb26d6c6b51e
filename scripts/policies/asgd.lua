-- asgd: asynchronous SGD, the baseline of Basu et al. (HiPC 2018) and of STAR, both
-- of which place their modes between BSP and this. Every worker is a group of its
-- own (mode 'grouped' with groups {1, 2, ..., N}), so each one pushes its gradient
-- to the parameter server as soon as it has it and nobody waits for a straggler;
-- the price is staleness (an update computed on weights several server versions
-- old). Basu et al.: "one worker per group = asynchronous SGD".
--
-- The local batches are the equal split of the global batch (tandem's Plan.equal:
-- the first B mod N workers take one more), within the workers' bounds; each
-- worker needs at least one sample (a group without samples carries nothing), so
-- the global batch must be at least the number of workers. The plan is returned on
-- the first call and after that only when the plan in force differs from it (the
-- engine rejected it, or something else replaced it); a returned plan is given
-- `wait` observations to show up in the stats before it is sent again.
--
-- Parameters (cluster.params), with defaults:
--   staleness = N       S, server versions a worker's weights may fall behind
--                       before faster workers wait: N is as good as unbounded for
--                       N workers of similar speed (each is at most N - 1 behind in
--                       the steady state) while still stopping a worker that has
--                       fallen far behind from feeding ancient gradients
--   sync_every = 10     global batches' worth of server updates between the points
--                       where all workers meet (and this policy is asked again)
--
-- State: the sent plan's bookkeeping (tandem.sync_plan's sender), the one table
-- save() returns as it is and restore() takes back whole (from this policy only).
local util = require 'tandem.policy_util'
local sync_plan = require 'tandem.sync_plan'

local WHO = 'asgd'
local WAIT = 4 -- observations a returned plan gets to show up before it is re-sent

local policy = {}
local C, batches, staleness, sync_every -- init() sets them, nothing changes them
local state                             -- the sender: { policy, calls, sent_at }

local function int_param(p, key, default, min, max) return util.int_param(p, key, default, min, max, WHO) end

function policy.init(cluster)
  C = util.read_cluster(cluster, WHO)
  local n = C.workers
  staleness = int_param(C.params, 'staleness', n, 0)
  sync_every = int_param(C.params, 'sync_every', 10, 1)
  local lo = {}
  for i = 1, n do lo[i] = math.max(C.min_batch[i], 1) end
  local why
  batches, why = util.equal_split(C.global_batch, lo, C.max_batch)
  if not batches then
    error(('%s: every worker needs at least one sample in its own group: %s'):format(WHO, why), 2)
  end
  state = sync_plan.sender(WHO)
end

-- Whether the stats show this policy's plan in force. An engine that reports no
-- mode knows only bsp: there the batches are all it can show.
local function in_force(stats)
  local workers = stats.workers
  if not util.same(util.batches(workers), batches) then return false end
  if stats.mode == nil then return true end
  if stats.mode ~= 'grouped' then return false end
  -- One worker a group: every group number appears once.
  local seen = {}
  for i = 1, C.workers do
    local g = workers[i].group
    if g == nil or seen[g] then return false end
    seen[g] = true
  end
  return true
end

function policy.step(stats)
  local resent = sync_plan.due(state, in_force(stats), WAIT)
  if resent == nil then return nil end
  local groups, plan = {}, {}
  for i = 1, C.workers do groups[i], plan[i] = i, batches[i] end
  return {
    local_batch = plan, mode = 'grouped', groups = groups, staleness = staleness, sync_every = sync_every,
    reason = ('asgd: %d workers, one a group, equal batches of ~%d; staleness bound %d, meeting every %d global '
              .. 'batches%s'):format(C.workers, batches[1], staleness, sync_every,
                                     resent and ' (re-sent: the plan in force differs)' or ''),
  }
end

function policy.save() return state end

function policy.restore(saved)
  if sync_plan.is_sender(saved, WHO) then state = saved end
end

return policy
