-- Dynamic stragglers, a scheduled slowdown, the lbb policy (see base.lua).
local e = dofile('scripts/experiments/suite/dynamic_stragglers/base.lua')
e.policy = { file = 'lbb' }
return e
