-- Measured GPU profiles in the emulator, the lbb policy (see base.lua).
local e = dofile('scripts/experiments/suite/gpu_profiles/base.lua')
e.policy = { file = 'lbb' }
return e
