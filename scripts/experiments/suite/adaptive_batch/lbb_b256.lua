-- Adaptive global batch: lbb at a fixed global batch of 256, lr scaled linearly
-- (0.2), an evaluation every 8 iterations (every 2048 samples, as at 64).
local e = dofile('base.lua')
e.policy = { file = 'lbb' }
e.global_batch = 256
e.lr = 0.2
e.eval_every = 8
return e
