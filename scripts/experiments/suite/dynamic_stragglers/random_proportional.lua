-- Dynamic stragglers, random slowdowns, the proportional policy (see base.lua).
local e = dofile('base.lua')
e.emulation.events = nil
e.emulation.random = { probability = 0.01, duration = { 10, 40 }, speed = { 0.2, 0.5 }, seed = 5 }
e.policy = { file = 'proportional' }
return e
