-- Grouped stalls: 2 fixed group(s) of contiguous workers, staleness bound S = 1
-- (the steady state of 2 groups at one pace; see base.lua): the accuracy cost of
-- staleness against the number of groups.
local e = dofile('base.lua')
e.sync = { mode = 'grouped', groups = { 1, 1, 1, 1, 2, 2, 2, 2 }, staleness = 1 }
return e
