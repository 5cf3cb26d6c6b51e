-- Adaptive global batch: lbb at tandem's default global batch, 64 (see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'lbb' }
return e
