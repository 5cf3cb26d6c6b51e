-- The LBB workload in the simulator, the equal policy (see base.lua).
-- runs with: tandem sim
local e = dofile('base.lua')
e.policy = { file = 'equal' }
return e
