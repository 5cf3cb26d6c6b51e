-- Scale: 1024 simulated workers, the equal policy (see base.lua).
-- runs with: tandem sim
return dofile('base.lua').cluster(1024, 'equal')
