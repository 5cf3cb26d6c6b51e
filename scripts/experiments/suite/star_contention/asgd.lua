-- Contention stragglers: the asgd policy (one worker a group; see base.lua).
local e = dofile('scripts/experiments/suite/star_contention/base.lua')
e.policy = { file = 'asgd' }
return e
