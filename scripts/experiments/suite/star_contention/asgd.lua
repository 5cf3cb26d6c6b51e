-- Contention stragglers: the asgd policy (one worker a group; see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'asgd' }
return e
