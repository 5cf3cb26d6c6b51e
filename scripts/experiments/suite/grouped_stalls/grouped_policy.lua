-- Grouped stalls: the grouped policy (groups from measured speeds; see base.lua).
local e = dofile('base.lua')
e.policy = { file = 'grouped' }
return e
