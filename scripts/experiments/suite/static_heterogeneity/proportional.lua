-- Static heterogeneity with the proportional policy (see base.lua for the study).
local e = dofile('base.lua')
e.policy = { file = 'proportional' }
return e
