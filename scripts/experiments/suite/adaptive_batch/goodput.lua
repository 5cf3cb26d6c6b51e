-- Adaptive global batch: the goodput policy chooses B in [64, 1024] (see base.lua),
-- lr 0.05 at B0 = 64 scaled by AdaScale's gain; an evaluation every 4 iterations
-- (256 to 4096 samples as B grows).
local e = dofile('base.lua')
e.policy = { file = 'goodput', global_batch = { min = 64, max = 1024 } }
e.lr_scaling = 'adascale'
e.eval_every = 4
return e
