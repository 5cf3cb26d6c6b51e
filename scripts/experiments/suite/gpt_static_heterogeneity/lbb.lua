-- GPT static heterogeneity with the lbb policy (see base.lua for the study).
local e = dofile('base.lua')
e.policy = { file = 'lbb' }
return e
