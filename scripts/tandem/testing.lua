-- tandem.testing: the Lua test harness behind `tandem test FILE.lua`
-- (engine/script/lua_test_runner.cpp).
--
-- A test file registers tests and returns the harness:
--
--   local T = require 'tandem.testing'
--   T.test('linear records its arguments', function()
--     T.eq(nn.linear(10).args, { out = 10, bias = 1 })
--   end)
--   return T
--
-- The runner calls each test, in the order registered, from C++ through the
-- engine's protected call (a fresh traceback for every failure), prints
-- "ok NAME" or "FAIL NAME: error + traceback" per test, then "N passed, M failed",
-- and exits non-zero on any failure (or when the file registers no test).
--
-- Assertions raise at the caller's line, so a failure points at the test:
--   T.eq(got, want [, what])          deep equality (tables compared key by key)
--   T.near(got, want [, tol [, what]]) |got - want| <= tol (default 1e-9), numbers or lists
--   T.ok(value [, what])              value is neither nil nor false
--   T.raises(fn, pattern [, what])    fn() raises an error whose text contains pattern
--                                     (plain text, or a Lua pattern); returns the text
--   T.fail(message)                   fails the test
local T = { tests = {} }

local by_name = {}

function T.test(name, fn)
  if type(name) ~= 'string' or name == '' then error('T.test: the first argument is the test name', 2) end
  if type(fn) ~= 'function' then error("T.test('" .. name .. "'): the second argument must be a function", 2) end
  if by_name[name] then error("T.test: a test named '" .. name .. "' is already registered", 2) end
  by_name[name] = true
  T.tests[#T.tests + 1] = { name = name, fn = fn }
end

local function show(v)
  if type(v) == 'string' then return string.format('%q', v) end
  if type(v) ~= 'table' then return tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do
    if #parts >= 8 then parts[#parts + 1] = '...'; break end
    parts[#parts + 1] = (type(k) == 'string' and k or '[' .. tostring(k) .. ']') .. ' = ' .. show(v[k])
  end
  return '{' .. table.concat(parts, ', ') .. '}'
end

local function prefix(what) return what and (what .. ': ') or '' end

-- nil when equal, else the path of the first difference and the two values there.
local function difference(got, want, path, seen)
  if type(got) ~= 'table' or type(want) ~= 'table' then
    if got == want then return nil end
    return path, got, want
  end
  seen = seen or {}
  if seen[got] == want then return nil end
  seen[got] = want
  for k, w in pairs(want) do
    local p, g2, w2 = difference(got[k], w, path .. '.' .. tostring(k), seen)
    if p then return p, g2, w2 end
  end
  for k, g in pairs(got) do
    if want[k] == nil then return path .. '.' .. tostring(k), g, nil end
  end
  return nil
end

function T.eq(got, want, what)
  local path, g, w = difference(got, want, '')
  if path then
    local at = path ~= '' and (' at ' .. path:sub(2)) or ''
    error(string.format('%sexpected %s, got %s%s', prefix(what), show(w), show(g), at), 2)
  end
end

function T.near(got, want, tol, what)
  tol = tol or 1e-9
  local function close(a, b) return type(a) == 'number' and type(b) == 'number' and math.abs(a - b) <= tol end
  if type(want) == 'table' then
    if type(got) ~= 'table' or #got ~= #want then
      error(string.format('%sexpected a list of %d numbers, got %s', prefix(what), #want, show(got)), 2)
    end
    for i = 1, #want do
      if not close(got[i], want[i]) then
        error(string.format('%sat [%d]: expected %s within %g, got %s', prefix(what), i, show(want[i]), tol,
                            show(got[i])), 2)
      end
    end
  elseif not close(got, want) then
    error(string.format('%sexpected %s within %g, got %s', prefix(what), show(want), tol, show(got)), 2)
  end
end

function T.ok(v, what)
  if not v then error(prefix(what) .. 'expected a true value, got ' .. show(v), 2) end
end
T.truthy = T.ok

function T.fail(message) error(message or 'failed', 2) end

-- The text of an error value: strings as they are, user errors ({message=...}) by
-- their message, anything else through tostring.
function T.error_text(err)
  if type(err) == 'table' and type(err.message) == 'string' then return err.message end
  return tostring(err)
end

function T.raises(fn, pattern, what)
  if type(fn) ~= 'function' then error('T.raises: the first argument must be a function', 2) end
  local ok, err = pcall(fn)
  if ok then
    error(string.format('%sexpected an error%s, but none was raised', prefix(what),
                        pattern and (" containing '" .. pattern .. "'") or ''), 2)
  end
  local text = T.error_text(err)
  if pattern and not text:find(pattern, 1, true) then
    local matched, found = pcall(string.find, text, pattern)
    if not (matched and found) then
      error(string.format("%sthe error %s does not contain '%s'", prefix(what), show(text), pattern), 2)
    end
  end
  return text
end

return T
