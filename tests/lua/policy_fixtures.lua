-- What the policy tests (test_policies.lua, test_sync_policies.lua) share: loading a
-- policy file fresh, deterministic noise, the check that save() holds only what
-- the engine can carry between Lua states, and a saved state's trip through text
-- as a checkpoint makes it.
local T = require 'tandem.testing'

local M = {}

local root = package.tandem_root or '.'

function M.policy_path(name) return root .. '/scripts/policies/' .. name .. '.lua' end
function M.load_policy(name) return dofile(M.policy_path(name)) end

-- Deterministic noise in [-1, 1]: a hash of (i, t), so runs repeat exactly.
function M.noise(i, t)
  local x = math.sin(i * 12.9898 + t * 78.233) * 43758.5453
  return 2 * (x - math.floor(x)) - 1
end

-- What both simulated clusters (test_policies, test_sync_policies) start from: the
-- options every one takes (speeds, B, k: ms per sample at speed 1, fixed: ms, noise:
-- relative, lag, speed_at(i, t, base), window: history length, lo, hi: default 0
-- and B, params), the bookkeeping tables, and the cluster table init() gets. Each
-- file adds its own fields and its metatable.
function M.sim_fields(opts)
  local n = #opts.speeds
  local s = {
    n = n, B = opts.B or 512, k = opts.k or 1, fixed = opts.fixed or 5, noise = opts.noise or 0.01,
    lag = opts.lag or 2, speeds = opts.speeds, speed_at = opts.speed_at, window = opts.window or 20,
    history = {}, pending = {}, plans = {}, trace = {},
  }
  s.lo, s.hi = opts.lo, opts.hi
  if not s.lo then
    s.lo, s.hi = {}, {}
    for i = 1, n do s.lo[i], s.hi[i] = 0, s.B end
  end
  local devices = {}
  for i = 1, n do devices[i] = 'sim' .. s.speeds[i] end
  s.cluster = { workers = n, global_batch = s.B, min_batch = s.lo, max_batch = s.hi, devices = devices,
                params = opts.params or {}, history = s.window }
  return s
end

-- Worker i's speed at iteration t (a simulated cluster's method).
function M.sim_speed(self, i, t)
  if self.speed_at then return self.speed_at(i, t, self.speeds[i]) end
  return self.speeds[i]
end

-- A deep copy that accepts only what the engine can carry between Lua states.
function M.plain_copy(v, path)
  local kind = type(v)
  if kind == 'number' or kind == 'string' or kind == 'boolean' or kind == 'nil' then return v end
  if kind ~= 'table' then T.fail(('save() holds a %s at %s'):format(kind, path)) end
  local out = {}
  for k, x in pairs(v) do
    T.ok(type(k) == 'number' or type(k) == 'string', 'plain keys at ' .. path)
    out[k] = M.plain_copy(x, path .. '.' .. tostring(k))
  end
  return out
end

-- v as a checkpoint writes a saved state (policy_sandbox.cpp's write_literal):
-- numbers to 17 digits, NaN and the infinities as expressions.
function M.literal(v)
  local kind = type(v)
  if kind == 'number' then
    if v ~= v then return '(0/0)' end
    if v == math.huge or v == -math.huge then return v > 0 and '(1/0)' or '(-1/0)' end
    return ('%.17g'):format(v)
  elseif kind == 'string' then
    return ('%q'):format(v)
  elseif kind == 'boolean' or kind == 'nil' then
    return tostring(v)
  elseif kind ~= 'table' then
    T.fail('save() holds a ' .. kind .. ': a checkpoint holds plain data')
  end
  local parts = {}
  for k, x in pairs(v) do parts[#parts + 1] = '[' .. M.literal(k) .. ']=' .. M.literal(x) end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- A literal read back as a resume reads it: data, in an empty environment.
function M.read_literal(text)
  local chunk = assert(loadstring('return ' .. text, '=saved state'))
  setfenv(chunk, {})
  return chunk()
end

return M
