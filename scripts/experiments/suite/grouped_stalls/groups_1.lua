-- Grouped stalls: 1 fixed group(s) of contiguous workers, staleness bound S = 0
-- (the steady state of 1 groups at one pace; see base.lua): the accuracy cost of
-- staleness against the number of groups.
local e = dofile('base.lua')
e.sync = { mode = 'grouped', groups = { 1, 1, 1, 1, 1, 1, 1, 1 }, staleness = 0 }
return e
