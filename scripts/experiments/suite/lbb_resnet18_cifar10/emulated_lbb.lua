-- The LBB workload emulated on CPU workers, the lbb policy (see base.lua).
local e = dofile('base_emulated.lua')
e.policy = { file = 'lbb' }
return e
