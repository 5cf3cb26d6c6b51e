-- Grouped stalls: bsp with the equal split, the reference (see base.lua).
local e = dofile('scripts/experiments/suite/grouped_stalls/base.lua')
return e
