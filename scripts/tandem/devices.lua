-- tandem.devices: a small library of GPU profiles for emulation and `tandem sim`:
-- each device's measured training throughput and memory, so an experiment can say
-- "two A100s and two V100s" instead of inventing speed factors.
--
-- Throughput is ResNet-50 v1.5 training on ImageNet, one GPU, images per second,
-- from NVIDIA's DeepLearningExamples repository, PyTorch/Classification/ConvNets/
-- resnet50v1.5/README.md, "Training performance results" (pytorch-21.03 NGC
-- container): DGX A100 80GB 938 img/s TF32, 2470 mixed precision; DGX-1 V100 16GB
-- 367 FP32, 1200 mixed; DGX-1 V100 32GB 356 FP32, 1156 mixed. Only these, because
-- only these have a source here; add your own from `tandem profile` on your devices
-- (devices.add). Relative speeds of ResNet-50 are a proxy for other models: convolution
-- nets scale alike across these GPUs, small MLPs (bound by launch overhead) do not.
local M = {}

M.known = {
  a100_80gb = { memory_gb = 80, throughput = { tf32 = 938, fp32 = 938, amp = 2470 },
                source = 'NVIDIA DeepLearningExamples ResNet-50 v1.5 PyTorch README, DGX A100 80GB, 1 GPU' },
  v100_16gb = { memory_gb = 16, throughput = { fp32 = 367, amp = 1200 },
                source = 'NVIDIA DeepLearningExamples ResNet-50 v1.5 PyTorch README, DGX-1 V100 16GB, 1 GPU' },
  v100_32gb = { memory_gb = 32, throughput = { fp32 = 356, amp = 1156 },
                source = 'NVIDIA DeepLearningExamples ResNet-50 v1.5 PyTorch README, DGX-1 V100 32GB, 1 GPU' },
}

local function names()
  local out = {}
  for k in pairs(M.known) do out[#out + 1] = k end
  table.sort(out)
  return table.concat(out, ', ')
end

local function lookup(name, level)
  local d = M.known[name]
  if not d then error(("tandem.devices: no device '%s' (known: %s; devices.add adds one)"):format(tostring(name),
                                                                                              names()), level + 1) end
  return d
end

-- Adds (or replaces) a device: throughput by precision (samples/s of the same
-- workload as the others, or of your own model for all of them), memory in GB.
function M.add(name, device)
  if type(device) ~= 'table' or type(device.throughput) ~= 'table' then
    error('tandem.devices.add(name, {throughput = {fp32 = ...}, memory_gb = ...})', 2)
  end
  M.known[name] = device
end

-- A worker's speed factor relative to `reference` at `precision`.
function M.speed(name, precision, reference)
  precision = precision or 'fp32'
  local d, r = lookup(name, 2), lookup(reference or name, 2)
  local a, b = d.throughput[precision], r.throughput[precision]
  if not a or not b then
    error(("tandem.devices: no %s throughput for %s or %s"):format(precision, name, reference or name), 2)
  end
  return a / b
end

-- The emulation table for a cluster of named devices, one per worker:
--   devices.emulation { 'a100_80gb', 'v100_16gb', precision = 'amp', reference = 'v100_16gb',
--                       memory = p_memory (optional: {batch, mb} from tandem profile) }
-- Speeds are relative to `reference` (default: the slowest device listed), which runs
-- at `core_fraction` of a core (emulation.reference; default 1); memory_mb is each
-- device's memory, a cap on its local batch when the model's memory by batch
-- (`memory`) is given.
function M.emulation(spec)
  if type(spec) ~= 'table' or #spec == 0 then
    error("tandem.devices.emulation{ 'a100_80gb', 'v100_16gb', ... } needs one device per worker", 2)
  end
  local precision = spec.precision or 'fp32'
  local reference = spec.reference
  if not reference then
    for _, name in ipairs(spec) do
      local t = lookup(name, 2).throughput[precision]
      if not t then error(('tandem.devices: no %s throughput for %s'):format(precision, name), 2) end
      if not reference or t < M.known[reference].throughput[precision] then reference = name end
    end
  end
  local workers = {}
  for i, name in ipairs(spec) do
    local d = lookup(name, 2)
    workers[i] = { speed = M.speed(name, precision, reference) }
    if spec.memory then workers[i].memory_mb = d.memory_gb * 1024 end
  end
  return { workers = workers, memory = spec.memory, reference = spec.core_fraction }
end

return M
