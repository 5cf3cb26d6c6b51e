-- Contention stragglers: bsp with the equal split (see base.lua).
return dofile('scripts/experiments/suite/star_contention/base.lua')
