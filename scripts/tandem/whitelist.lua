-- tandem.whitelist: the environment user code runs in (policies and console
-- commands; engine/script/lua_whitelist.hpp runs this once, on a fresh state, before
-- any user code). It keeps only what is listed below and strips the rest from the
-- globals in place, so the tandem library modules a policy requires see the same
-- reduced world. What it removes, and why:
--   io, os (but clock and time), package, ffi, jit, debug (but traceback): files,
--     commands, native libraries, and ways around the time budget's hook;
--   dofile, loadfile, load/loadstring of binary chunks, string.dump: LuaJIT's VM is
--     not safe against crafted bytecode (its own documentation says so);
--   setfenv, getfenv, newproxy (finalizers run outside any protected call),
--     collectgarbage (but "count"), module, gcinfo.
-- require is replaced by one that loads only the tandem library (tandem.*, from
-- <root>/scripts, as text) and the lpsolve module.
--
-- Called as require('tandem.whitelist')(G, root): G is the global table to reduce,
-- root the tandem root (package.tandem_root).

-- Captured now: the functions below run after the globals are gone (or replaced by
-- user code).
local pairs, ipairs, tostring = pairs, ipairs, tostring

local BASE = {
  'assert', 'error', 'ipairs', 'next', 'pairs', 'pcall', 'print', 'rawequal', 'rawget', 'rawset',
  'select', 'setmetatable', 'getmetatable', 'tonumber', 'tostring', 'type', 'unpack', 'xpcall',
  '_VERSION', 'string', 'table', 'math', 'bit', 'coroutine',
}
local KEEP_ONLY = {  -- library = the functions kept (a fresh table replaces the library)
  os = { 'clock', 'time' },
  debug = { 'traceback' },
}
local DROP = { string = { 'dump' } }

local function reason(name)
  return name .. ' is not available to policies and console commands (tandem.whitelist: docs/policies.md lists '
    .. 'what is)'
end

return function(G, root)
  local load_, io_open, preload_lpsolve = G.load, G.io.open, G.package.preload.lpsolve
  local error_, type_, setmetatable_ = G.error, G.type, G.setmetatable
  local collect = G.collectgarbage

  local kept = {}
  for _, name in ipairs(BASE) do kept[name] = G[name] end
  for lib, names in pairs(KEEP_ONLY) do
    local t = {}
    for _, f in ipairs(names) do t[f] = G[lib][f] end
    kept[lib] = t
  end
  for lib, names in pairs(DROP) do
    for _, f in ipairs(names) do kept[lib][f] = nil end
  end

  -- Text only: a binary chunk is refused by the loader itself, whatever the caller
  -- passes as mode.
  kept.load = function(chunk, name, _, env)
    if env ~= nil then return nil, reason('load with an environment') end
    return load_(chunk, name, 't')
  end
  kept.loadstring = function(s, name)
    if type_(s) ~= 'string' then error_('loadstring expects a string', 2) end
    return load_(s, name, 't')
  end
  kept.collectgarbage = function(what)
    if what ~= 'count' then error_(reason('collectgarbage("' .. tostring(what) .. '")'), 2) end
    return collect('count')
  end

  local loaded = {}
  local function search(name)
    local file = name:gsub('%.', '/')
    for _, path in ipairs({ root .. '/scripts/' .. file .. '.lua', root .. '/scripts/' .. file .. '/init.lua' }) do
      local f = io_open(path, 'rb')
      if f then
        local text = f:read('*a')
        f:close()
        return text, path
      end
    end
  end
  kept.require = function(name)
    if type_(name) ~= 'string' then error_('require expects a module name', 2) end
    if loaded[name] ~= nil then return loaded[name] end
    local value
    if name == 'lpsolve' then
      value = preload_lpsolve(name)
    else
      if not name:match('^tandem%.[%w_]+$') or name == 'tandem.whitelist' then
        error_(reason("module '" .. name .. "'") .. '; policies may require tandem.* and lpsolve', 2)
      end
      local text, path = search(name)
      if not text then error_("module '" .. name .. "' not found under " .. root .. '/scripts', 2) end
      local chunk, err = load_(text, '@' .. path, 't')
      if not chunk then error_(err, 0) end
      value = chunk(name)
      if value == nil then value = true end
    end
    loaded[name] = value
    return value
  end

  for k in pairs(G) do G[k] = nil end
  for k, v in pairs(kept) do G[k] = v end
  G._G = G
  setmetatable_(G, nil)
end
