-- What the policy tests (test_policies.lua, test_sync_policies.lua) share: loading a
-- policy file fresh, deterministic noise, and the check that save() holds only what
-- the engine can carry between Lua states.
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

return M
