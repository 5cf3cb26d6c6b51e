-- Contention stragglers: bsp with the equal split (see base.lua).
return dofile('base.lua')
