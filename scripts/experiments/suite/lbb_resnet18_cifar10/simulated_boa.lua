-- The LBB workload in the simulator, the boa policy (see base.lua).
-- runs with: tandem sim
local e = dofile('base.lua')
e.policy = { file = 'boa' }
return e
