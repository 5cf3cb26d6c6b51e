-- Static heterogeneity with the proportional policy (see base.lua for the study).
local e = dofile('scripts/experiments/suite/static_heterogeneity/base.lua')
e.policy = { file = 'proportional' }
return e
