-- tandem.search_path: where an experiment's parts are found, so that an experiment
-- runs from any working directory and a copied scripts/ folder brings its own
-- policies. A relative path (an experiment's dofile, a policy file) is looked for in
-- these directories, first match wins:
--   1. the folder of the file that calls dofile (dofile only),
--   2. the experiment file's folder,
--   3. each folder of TANDEM_PATH (colon-separated), in order,
--   4. the working directory,
--   5. tandem's own tree (TANDEM_HOME, or the source tree it was built from).
-- A policy named by name (policy.file = 'lbb') is the path policies/NAME.lua or
-- scripts/policies/NAME.lua, looked for the same way. require() looks in the
-- experiment's folder and TANDEM_PATH's (?.lua and scripts/?.lua) before tandem's.
local M = {}

local function dirname(path) return path:match('^(.*)/[^/]*$') or '.' end

-- A readable file (a directory opens, but does not read).
local function readable(path)
  local f = io.open(path, 'r')
  if not f then return false end
  local _, err = f:read(0)
  f:close()
  return err == nil
end
M.readable = readable

-- The folders of TANDEM_PATH, in order (empty entries skipped).
function M.tandem_path()
  local dirs = {}
  for d in (os.getenv('TANDEM_PATH') or ''):gmatch('[^:]+') do dirs[#dirs + 1] = d end
  return dirs
end

-- The search directories for an experiment file `source` (nil: none), after `first`.
function M.dirs(source, first)
  local dirs = {}
  if first then dirs[#dirs + 1] = first end
  if source then dirs[#dirs + 1] = dirname(source) end
  for _, d in ipairs(M.tandem_path()) do dirs[#dirs + 1] = d end
  dirs[#dirs + 1] = '.'
  if package.tandem_root then dirs[#dirs + 1] = package.tandem_root end
  return dirs
end

-- The first readable D/path for D in dirs (path itself when absolute), or nil and
-- the list of places tried.
function M.find(path, dirs)
  if path:sub(1, 1) == '/' then return readable(path) and path or nil, { path } end
  local tried = {}
  for _, d in ipairs(dirs) do
    local p = d == '.' and path or d .. '/' .. path
    tried[#tried + 1] = p
    if readable(p) then return p, tried end
  end
  return nil, tried
end

-- A policy: a bare name (no '/' or '.') as policies/NAME.lua or scripts/policies/NAME.lua,
-- anything else as a path. Returns the file, or nil and the places tried.
function M.find_policy(file, source)
  local dirs = M.dirs(source)
  if file:find('[/.]') then return M.find(file, dirs) end
  local tried = {}
  for _, d in ipairs(dirs) do
    -- A name is never the working directory's: policies/ there would shadow tandem's.
    local names = d == '.' and {} or { 'policies/' .. file .. '.lua', 'scripts/policies/' .. file .. '.lua' }
    for _, rel in ipairs(names) do
      local p, t = M.find(rel, { d })
      tried[#tried + 1] = t[1]
      if p then return p, tried end
    end
  end
  return nil, tried
end

-- Makes the experiment `source`'s dofile and require search as above (in the Lua
-- state that runs it, before it runs).
function M.install(source)
  local lua_dofile = dofile
  _G.dofile = function(path)
    if type(path) ~= 'string' then return lua_dofile(path) end
    local caller = debug.getinfo(2, 'S')
    local from = caller and caller.source:sub(1, 1) == '@' and dirname(caller.source:sub(2)) or nil
    local found, tried = M.find(path, M.dirs(source, from))
    if not found then
      error(string.format("dofile: '%s' not found (looked for %s; TANDEM_PATH adds folders)", path,
                          table.concat(tried, ', ')), 2)
    end
    return lua_dofile(found)
  end
  local extra = { dirname(source) .. '/?.lua' }
  for _, d in ipairs(M.tandem_path()) do
    extra[#extra + 1] = d .. '/?.lua'
    extra[#extra + 1] = d .. '/scripts/?.lua'
  end
  package.path = table.concat(extra, ';') .. ';' .. package.path
end

return M
