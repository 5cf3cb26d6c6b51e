-- Measured GPU profiles in the emulator, the equal policy (see base.lua).
local e = dofile('scripts/experiments/suite/gpu_profiles/base.lua')
e.policy = { file = 'equal' }
return e
