-- Contention stragglers: k-sync fixed, the server steps on the first 6 of 8
-- gradients (see base.lua).
local e = dofile('base.lua')
e.sync = { mode = 'ksync', k = 6 }
return e
