-- Measured GPU profiles in the simulator, the equal policy (see base.lua).
-- runs with: tandem sim
local e = dofile('scripts/experiments/suite/gpu_profiles/base.lua')
e.policy = { file = 'equal' }
return e
