-- tandem.repl: the console's built-in commands (engine/script/repl.hpp runs them on
-- rank 0 at an iteration boundary). `engine` is the C side: it reads the run's state
-- and queues requests; everything here is formatting and argument checking.
local M = {}

local function pad(s, w, right)
  s = tostring(s)
  if #s >= w then return s end
  return right and string.rep(' ', w - #s) .. s or s .. string.rep(' ', w - #s)
end

-- Prints rows (tables) as a table with the given columns {key, header, format}.
local function print_table(rows, cols)
  local cells, widths = {}, {}
  for j, c in ipairs(cols) do widths[j] = #c[2] end
  for i, r in ipairs(rows) do
    cells[i] = {}
    for j, c in ipairs(cols) do
      local v = r[c[1]]
      local s = v == nil and '-' or (c[3] and type(v) == 'number' and string.format(c[3], v) or tostring(v))
      cells[i][j] = s
      widths[j] = math.max(widths[j], #s)
    end
  end
  local head = {}
  for j, c in ipairs(cols) do head[j] = pad(c[2], widths[j], c[3] ~= nil) end
  print(table.concat(head, '  '))
  for _, row in ipairs(cells) do
    local out = {}
    for j, c in ipairs(cols) do out[j] = pad(row[j], widths[j], c[3] ~= nil) end
    print(table.concat(out, '  '))
  end
end

-- A value as readable text (tables nested, keys sorted, cycles cut).
local function show_value(v, indent, seen)
  if type(v) == 'string' then return v end
  if type(v) ~= 'table' then return tostring(v) end
  if seen[v] then return '{...}' end
  seen[v] = true
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == 'number' or type(a) == 'string') then return a < b end
    return type(a) < type(b)
  end)
  if #keys == 0 then return '{}' end
  local parts, inner = {}, indent .. '  '
  for _, k in ipairs(keys) do
    local key = type(k) == 'string' and k or '[' .. tostring(k) .. ']'
    parts[#parts + 1] = inner .. key .. ' = ' .. show_value(v[k], inner, seen)
  end
  return '{\n' .. table.concat(parts, ',\n') .. '\n' .. indent .. '}'
end

function M.show(...)
  for i = 1, select('#', ...) do print(show_value(select(i, ...), '', {})) end
end

-- A worker's straggler class from its compute time against the median.
local function classify(list)
  local ms = {}
  for _, w in ipairs(list) do if w.local_batch > 0 then ms[#ms + 1] = w.compute_ms / w.local_batch end end
  table.sort(ms)
  local median = ms[math.floor((#ms + 1) / 2)]
  for _, w in ipairs(list) do
    if not median or w.local_batch == 0 then
      w.class = w.local_batch == 0 and 'idle' or '-'
    else
      local r = (w.compute_ms / w.local_batch) / median
      w.class = r > 1.5 and 'straggler' or (r < 0.67 and 'fast' or 'normal')
    end
  end
end

local HELP = [[
workers()            every worker: rank, host, device, local batch, compute/comm/idle ms,
                     samples/s, straggler class (per-sample compute vs the median), memory
plan()               the plan in force: local batches and sync mode
history(n)           the last n iterations (default 10): step ms, loss, plan
status()             the last iteration completed (as history() numbers it) and how many,
                     workers, wall time, last test accuracy
policy()             the running policy, its file, parameters and failures
swap('boa')          hot-swap a policy (a name under scripts/policies/ or a path), as a
                     file change would: loaded, dry-run, then swapped in; the old stays on failure
set(key, value)      change one of the policy's parameters (re-initialised, state handed over)
emulate{worker = 2, speed = 0.3, iterations = 50}
                     an emulated slowdown of a worker from the next iteration (emulated runs)
pause(), resume()    hold every worker at the next boundary; go on
checkpoint()         write a checkpoint at this boundary (kept with the periodic ones)
stop()               end the run after this iteration, summary written
help()               this list
Any other line is Lua, run at the next iteration boundary; expressions print their value.
Tab completes names; Ctrl-C clears the line (stop() stops the run); Ctrl-D on an empty
line detaches, and the run goes on.]]

function M.install(engine)
  function workers()
    local list = engine.workers()
    if #list == 0 then print('no iteration has finished yet') return end
    classify(list)
    -- The stats' columns are declared with the fields (worker_stats_fields.hpp); the
    -- class is worked out here, so its column is placed here, by number among them.
    local cols = engine.columns()
    cols[#cols + 1] = { 'class', 'class', column = 9 }
    table.sort(cols, function(a, b) return a.column < b.column end)
    print_table(list, cols)
  end
  function plan()
    local p = engine.plan()
    print(p.text)
  end
  function history(n)
    local rows = engine.history(n or 10)
    if #rows == 0 then print('no iteration has finished yet') return end
    print_table(rows, { { 'iteration', 'iteration', '%d' }, { 'step_ms', 'step_ms', '%.2f' },
                        { 'loss', 'loss', '%.4f' }, { 'plan', 'plan' }, { 'sync', 'sync' } })
  end
  function status() return engine.status() end
  function policy()
    local p = engine.policy()
    if not p then print('no policy: the plan stays as the experiment set it') return end
    print(('%s (%s)%s'):format(p.name, p.file, p.disabled and ' DISABLED after failures' or ''))
    if #p.params == 0 then
      print('params: none')
    else
      print('params (as in force; "default" where policy.params does not set it):')
      local width, value_width = 0, 0
      for _, q in ipairs(p.params) do width, value_width = math.max(width, #q.name), math.max(value_width, #q.value) end
      for _, q in ipairs(p.params) do
        local line = ('  %s = %s%s'):format(pad(q.name, width), pad(q.value, value_width), q.default and '  (default)' or '')
        print((line:gsub('%s+$', '')))
      end
    end
    print(('failures %d, rejected plans %d, swaps %d'):format(p.failures, p.rejected, p.swaps))
  end
  function swap(name)
    if type(name) ~= 'string' then error("swap('name') takes a policy name or a path", 2) end
    return engine.swap(name)
  end
  function set(key, value)
    if type(key) ~= 'string' then error('set(key, value): key is a parameter name', 2) end
    return engine.set(key, value)
  end
  function emulate(t)
    if type(t) ~= 'table' then error('emulate{worker = 2, speed = 0.3, iterations = 50}', 2) end
    engine.emulate(t)
    return ('worker %d at %gx speed from the next iteration%s'):format(t.worker, t.speed,
      t.iterations and t.iterations > 0 and (' for ' .. t.iterations .. ' iterations') or ' on')
  end
  function pause() engine.request('pause') return 'pausing at the next boundary: resume() goes on' end
  function resume() engine.request('resume') return 'resuming' end
  function stop() engine.request('stop') return 'stopping after this iteration' end
  function checkpoint() engine.request('checkpoint') return 'writing a checkpoint at this boundary' end
  function help() print(HELP) end
end

return M
