-- Measured GPU profiles in the emulator, the lbb policy (see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'lbb' }
return e
