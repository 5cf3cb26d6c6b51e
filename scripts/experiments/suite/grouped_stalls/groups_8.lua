-- Grouped stalls: 8 fixed group(s) of contiguous workers, staleness bound S = 7
-- (the steady state of 8 groups at one pace; see base.lua): the accuracy cost of
-- staleness against the number of groups.
local e = dofile('base.lua')
e.sync = { mode = 'grouped', groups = { 1, 2, 3, 4, 5, 6, 7, 8 }, staleness = 7 }
return e
