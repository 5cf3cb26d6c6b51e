-- The LBB workload in the simulator, the proportional policy (see base.lua).
-- runs with: tandem sim
local e = dofile('base.lua')
e.policy = { file = 'proportional' }
return e
