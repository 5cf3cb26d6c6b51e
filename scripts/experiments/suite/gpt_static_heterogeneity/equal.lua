-- GPT static heterogeneity with the equal policy (see base.lua for the study).
local e = dofile('scripts/experiments/suite/gpt_static_heterogeneity/base.lua')
e.policy = { file = 'equal' }
return e
