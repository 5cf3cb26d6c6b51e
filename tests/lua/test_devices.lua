-- tandem.devices: the sourced throughputs turn into speed factors and memory caps.
local T = require 'tandem.testing'
local devices = require 'tandem.devices'

T.test('speeds are throughput ratios against the reference', function()
  T.near(devices.speed('a100_80gb', 'amp', 'v100_16gb'), 2470 / 1200, 1e-12)
  T.near(devices.speed('v100_16gb', 'fp32', 'a100_80gb'), 367 / 938, 1e-12)
  T.eq(devices.speed('v100_32gb', 'amp'), 1)
end)

T.test('a cluster: the slowest device is the reference unless one is named', function()
  local e = devices.emulation { 'a100_80gb', 'v100_16gb', 'v100_32gb', precision = 'amp' }
  T.near(e.workers[3].speed, 1, 1e-12)               -- the V100 32GB is the slowest at amp
  T.near(e.workers[1].speed, 2470 / 1156, 1e-12)
  T.eq(e.workers[1].memory_mb, nil)                  -- no memory model, no caps
  local m = devices.emulation { 'a100_80gb', 'v100_16gb', memory = { batch = { 1, 256 }, mb = { 100, 9000 } } }
  T.eq(m.workers[2].memory_mb, 16 * 1024)
  T.eq(m.memory.mb[2], 9000)
end)

T.test('unknown devices and precisions are named errors; add() adds', function()
  T.raises(function() devices.speed('h900') end, "no device 'h900' %(known: a100_80gb")
  T.raises(function() devices.speed('v100_16gb', 'tf32', 'a100_80gb') end, 'no tf32 throughput')
  devices.add('mine', { throughput = { fp32 = 734 }, memory_gb = 24 })
  T.near(devices.speed('mine', 'fp32', 'v100_16gb'), 2, 1e-12)
end)

return T
