-- Grouped stalls: bsp with the equal split, the reference (see base.lua).
local e = dofile('base.lua')
return e
