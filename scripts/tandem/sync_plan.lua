-- tandem.sync_plan: what the sync-mode policies (grouped, star) share about plans in
-- force: a plan's signature ('mode|groups|batches', groups renumbered by first
-- appearance so two numberings of one grouping compare equal), the signature the
-- stats show, and a tracker that tells when a returned plan has shown up in the
-- stats (or has been waited for too long: the engine may have rejected it); and the
-- send-once logic of the policies that return one fixed plan.
local M = {}

function M.canonical(groups)
  local map, used, out = {}, 0, {}
  for i = 1, #groups do
    local g = groups[i]
    if not map[g] then
      used = used + 1
      map[g] = used
    end
    out[i] = map[g]
  end
  return out
end

function M.signature(mode, groups, batches)
  if mode == 'grouped' then
    return 'grouped|' .. table.concat(M.canonical(groups), ',') .. '|' .. table.concat(batches, ',')
  end
  return mode .. '||' .. table.concat(batches, ',')
end

function M.stats_groups(workers)
  local g = {}
  for i = 1, #workers do g[i] = workers[i].group or 1 end
  return g
end

function M.stats_signature(stats)
  local b = {}
  for i = 1, #stats.workers do b[i] = stats.workers[i].local_batch end
  return M.signature(stats.mode or 'bsp', M.stats_groups(stats.workers), b)
end

-- track = {current, run, pending, waited}: the signature in force and for how many
-- observations, and the plan returned last. Returns 'applied' when the pending plan
-- shows up, 'given_up' after `wait` observations without it.
function M.track_update(track, sig, wait)
  if track.current == sig then
    track.run = track.run + 1
  else
    track.current, track.run = sig, 1
  end
  if track.pending then
    if sig == track.pending then
      track.pending = nil
      return 'applied'
    end
    track.waited = track.waited + 1
    if track.waited > wait then
      track.pending = nil
      return 'given_up'
    end
  end
end

-- A fixed plan sent once (asgd, local_sgd): due(sent, shown, wait) says whether to
-- return it at this call: nil not now (the stats show it, or it was sent less than
-- `wait` calls ago), false the first time, true again (the stats never showed it).
-- sent = {policy, calls, sent_at} is the whole state of such a policy: what its
-- save() returns and its restore() takes back.
function M.sender(who) return { policy = who, calls = 0, sent_at = nil } end

-- Whether `saved` (what restore() was handed) is a sender's state saved by `who`.
function M.is_sender(saved, who)
  return type(saved) == 'table' and saved.policy == who and type(saved.calls) == 'number'
end

function M.due(sent, shown, wait)
  sent.calls = sent.calls + 1
  if shown then
    sent.sent_at = nil
    return nil
  end
  if sent.sent_at and sent.calls - sent.sent_at <= wait then return nil end
  local resent = sent.sent_at ~= nil
  sent.sent_at = sent.calls
  return resent
end

return M
