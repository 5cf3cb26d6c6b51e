-- Dynamic stragglers, a scheduled slowdown, the proportional policy (see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'proportional' }
return e
