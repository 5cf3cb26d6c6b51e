-- Scale: 256 simulated workers, the equal policy (see base.lua).
-- runs with: tandem sim
return dofile('base.lua').cluster(256, 'equal')
