-- Dynamic stragglers, a scheduled slowdown, the proportional policy (see base.lua).
local e = dofile('scripts/experiments/suite/dynamic_stragglers/base.lua')
e.policy = { file = 'proportional' }
return e
