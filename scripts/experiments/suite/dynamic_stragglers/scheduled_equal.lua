-- Dynamic stragglers, a scheduled slowdown, the equal policy (see base.lua).
local e = dofile('scripts/experiments/suite/dynamic_stragglers/base.lua')
e.policy = { file = 'equal' }
return e
