-- Scale: 64 simulated workers, the lbb policy (see base.lua).
-- runs with: tandem sim
return dofile('base.lua').cluster(64, 'lbb')
