-- The LBB workload emulated on CPU workers, the equal policy (see base.lua).
local e = dofile('base_emulated.lua')
e.policy = { file = 'equal' }
return e
