-- Dynamic stragglers, a scheduled slowdown, the equal policy (see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'equal' }
return e
