-- Contention stragglers: the star policy (see base.lua).
local e = dofile('scripts/experiments/suite/star_contention/base.lua')
e.policy = { file = 'star' }
return e
