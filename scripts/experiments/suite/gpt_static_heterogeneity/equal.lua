-- GPT static heterogeneity with the equal policy (see base.lua for the study).
local e = dofile('base.lua')
e.policy = { file = 'equal' }
return e
