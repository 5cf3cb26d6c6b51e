-- Contention stragglers: the asgd policy (one worker a group; see base.lua).
-- At bsp's learning rate (0.1, momentum 0.9) ASGD diverges in some runs: with 8
-- workers an update is ~6 versions stale, and delay shrinks the stable step of
-- momentum SGD many-fold. Half of it (0.05) trained in every run tried (3 of 3).
local e = dofile('scripts/experiments/suite/star_contention/base.lua')
e.policy = { file = 'asgd' }
e.lr = 0.05
return e
