-- Static heterogeneity with the boa policy (see base.lua for the study).
local e = dofile('base.lua')
e.policy = { file = 'boa' }
return e
