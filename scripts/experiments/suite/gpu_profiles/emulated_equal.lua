-- Measured GPU profiles in the emulator, the equal policy (see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'equal' }
return e
