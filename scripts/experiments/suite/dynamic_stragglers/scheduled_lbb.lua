-- Dynamic stragglers, a scheduled slowdown, the lbb policy (see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'lbb' }
return e
