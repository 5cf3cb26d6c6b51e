-- The LBB workload in the simulator, the lbb policy (see base.lua).
-- runs with: tandem sim
local e = dofile('base.lua')
e.policy = { file = 'lbb' }
return e
