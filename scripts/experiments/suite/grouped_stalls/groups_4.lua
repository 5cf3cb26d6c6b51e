-- Grouped stalls: 4 fixed group(s) of contiguous workers, staleness bound S = 3
-- (the steady state of 4 groups at one pace; see base.lua): the accuracy cost of
-- staleness against the number of groups.
local e = dofile('base.lua')
e.sync = { mode = 'grouped', groups = { 1, 1, 2, 2, 3, 3, 4, 4 }, staleness = 3 }
return e
