-- Contention stragglers: the star policy (see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'star' }
return e
