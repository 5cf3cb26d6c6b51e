-- Fuzzing experiment resolution (scripts/tandem/experiment.lua): every key of the
-- schema given a value of the wrong type or out of its range, in the experiment
-- file and as a command-line override, must be rejected as a user error whose
-- message names the key (and, for ranges, the bound) and whose hint says what to
-- do; every key set to its default must pass. Then thousands of random malformed
-- experiments and overrides from a fixed seed: resolve() either returns an
-- experiment or raises a user error, never an internal Lua error (an "attempt to
-- index a nil value" inside experiment.lua is a crash as far as the user is
-- concerned). Errors raised inside the model file itself (models/mlp.lua, with its
-- line) are the model's own and allowed.
local T = require 'tandem.testing'
local E = require 'tandem.experiment'

local SOURCE = 'fuzz.lua'

local function base()
  return { model = 'mlp', model_args = { hidden = { 8 } }, global_batch = 64 }
end

local function deep_copy(v)
  if type(v) ~= 'table' then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy(x) end
  return out
end

-- resolve() as a caller sees it: ok, result | false, 'user', err | false, 'model', text
-- | false, 'internal', text.
local function try_resolve(exp, overrides, world)
  local ok, res = pcall(E.resolve, exp, overrides or {}, SOURCE, world)
  if ok then return true, res end
  if type(res) == 'table' and type(res.message) == 'string' then return false, 'user', res end
  local text = tostring(res)
  if text:find('^models/[%w_]+%.lua:%d+:') then return false, 'model', text end
  return false, 'internal', text
end

local function expect_user_error(exp, overrides, must_name, what)
  local ok, kind, err = try_resolve(exp, overrides)
  if ok then T.fail((what or '') .. ': accepted, should be rejected') end
  if kind ~= 'user' then T.fail((what or '') .. ': not a user error (' .. kind .. '): ' .. tostring(err)) end
  T.ok(type(err.hint) == 'string' and #err.hint > 0, (what or '') .. ': a hint says what to do: ' .. err.message)
  for _, part in ipairs(must_name or {}) do
    T.ok(err.message:find(part, 1, true), string.format("%s: the message names '%s': %s", what or '', part,
                                                         err.message))
  end
  return err
end

-- Every leaf of the schema: {path, parts, node}.
local function leaves(node, path, parts, out)
  out = out or {}
  local keys = {}
  for k in pairs(node.fields) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local sub = node.fields[k]
    local p = path == '' and k or path .. '.' .. k
    local ps = { unpack(parts) }
    ps[#ps + 1] = k
    if sub.kind == 'record' then leaves(sub, p, ps, out) else out[#out + 1] = { path = p, parts = ps, node = sub } end
  end
  return out
end

local LEAVES = leaves(E.schema, '', {})

local function set_path(exp, parts, v)
  local t = exp
  for i = 1, #parts - 1 do
    if type(rawget(t, parts[i])) ~= 'table' then rawset(t, parts[i], {}) end
    t = rawget(t, parts[i])
  end
  rawset(t, parts[#parts], v)
end

-- Values of the wrong type (in the file) and text the override cannot read, for a
-- node; out-of-range values with the bound the message must name.
-- A bound as the messages write it: integers in full, not 9.007199254741e+15.
local function bound_text(v)
  return v == math.floor(v) and math.abs(v) <= 2 ^ 53 and string.format('%.0f', v) or tostring(v)
end

local function wrong_values(node)
  local file, text, range = {}, {}, {}
  local k = node.kind
  if k == 'number' or k == 'integer' then
    file = { 'abc', true, {}, 0 / 0, 1 / 0, -1 / 0 }
    text = { 'abc', '', 'true', '1,2' }
    if k == 'integer' then file[#file + 1] = 1.5; text[#text + 1] = '2.5' end
    if node.min then range[#range + 1] = { node.min - 1, '>= ' .. bound_text(node.min) } end
    if node.gt then range[#range + 1] = { node.gt, '> ' .. bound_text(node.gt) } end
    if node.max then
      local over = node.max + math.max(1, node.max * 1e-6)
      if k == 'integer' then over = math.floor(over) end  -- out of range, not a fraction
      range[#range + 1] = { over, '<= ' .. bound_text(node.max) }
    end
    if node.lt then range[#range + 1] = { node.lt, '< ' .. bound_text(node.lt) } end
    -- Every integer, whatever its bounds: past 2^53 (1e308 once came out as
    -- -9223372036854775808).
    if k == 'integer' and not node.max then range[#range + 1] = { 1e308, 'from ' } end
  elseif k == 'string' then
    file = { 42, true, {} }
    if node.one_of then text = { 'surely-not-one-of-them' } end
  elseif k == 'boolean' then
    file = { 'yes', 1, {} }
    text = { 'yes', '1', '' }
  elseif k == 'array' then
    file = { 'abc', 5, {}, { 0 }, { 1.5 }, { 'x' } }
    text = { 'abc', '0', '1,x' }
  elseif k == 'list' then
    file = { 'abc', 5, true, { x = 1 } }
    text = node.item.kind == 'record' and { '5', '{', '{{}' } or node.item.kind ~= 'string' and { 'abc', '1,,' } or {}
  elseif k == 'free' then
    file = { 'abc', 5, true }
    text = { '5' }
  end
  return file, text, range
end

T.test('every key: a wrong type in the file is rejected, naming the key', function()
  local n = 0
  for _, leaf in ipairs(LEAVES) do
    local file = wrong_values(leaf.node)
    for _, v in ipairs(file) do
      local exp = base()
      set_path(exp, leaf.parts, v)
      expect_user_error(exp, {}, { leaf.path }, leaf.path .. ' = ' .. tostring(v))
      n = n + 1
    end
  end
  T.ok(n > 200, 'cases tried: ' .. n)
end)

T.test('every key: an unreadable override is rejected, naming the key', function()
  local n = 0
  for _, leaf in ipairs(LEAVES) do
    local _, text = wrong_values(leaf.node)
    for _, v in ipairs(text) do
      local o = leaf.path .. '=' .. v
      expect_user_error(base(), { o }, { leaf.path }, o)
      n = n + 1
    end
  end
  T.ok(n > 100, 'cases tried: ' .. n)
end)

T.test('every key: a value out of range is rejected, naming the key and the bound', function()
  local n = 0
  for _, leaf in ipairs(LEAVES) do
    local _, _, range = wrong_values(leaf.node)
    for _, r in ipairs(range) do
      local exp = base()
      set_path(exp, leaf.parts, r[1])
      expect_user_error(exp, {}, { leaf.path, r[2] }, leaf.path .. ' = ' .. tostring(r[1]))
      local o = leaf.path .. '=' .. string.format('%.17g', r[1])
      expect_user_error(base(), { o }, { leaf.path, r[2] }, o)
      n = n + 1
    end
  end
  T.ok(n > 40, 'cases tried: ' .. n)
end)

T.test('every key set to its default, in the file or as an override, passes', function()
  local function text_of(v)
    if type(v) == 'table' then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = tostring(x) end
      return table.concat(parts, ',')
    end
    return tostring(v)
  end
  for _, leaf in ipairs(LEAVES) do
    local d = leaf.node.default
    if d ~= nil and leaf.node.kind ~= 'free' and not (type(d) == 'table' and next(d) == nil) then
      local exp = base()
      set_path(exp, leaf.parts, deep_copy(d))
      local ok, kind, err = try_resolve(exp)
      T.ok(ok, leaf.path .. ' = its default in the file: ' .. tostring(kind) .. ' ' ..
                 tostring(type(err) == 'table' and err.message or err))
      local o = leaf.path .. '=' .. text_of(d)
      ok, kind, err = try_resolve(base(), { o })
      T.ok(ok, o .. ': ' .. tostring(kind) .. ' ' .. tostring(type(err) == 'table' and err.message or err))
    end
  end
end)

-- The settings that only make sense together: each impossible combination is
-- rejected before any worker starts, with the setting, the range and the fix.
T.test('impossible combinations name the setting and the valid range', function()
  local cases = {
    { { 'global_batch=2', 'workers=4' }, { "'global_batch' must be >= the number of workers (4), got 2" } },
    { { 'global_batch=100000' }, { "'global_batch' must be <= 60000" } },
    { { 'plan.kind=fixed', 'plan.batches=1,2' }, { 'plan.batches has 2 local batches (summing to 3) for 1 workers' } },
    { { 'plan.kind=fixed', 'plan.batches=1,2', 'workers=2' }, { 'plan.batches sums to 3, not global_batch = 64' } },
    { { 'plan.kind=fixed' }, { "plan.kind = 'fixed' needs plan.batches" } },
    { { 'plan.batches=32,32', 'workers=2' }, { "plan.batches is only read with plan.kind = 'fixed'" } },
    { { 'plan.kind=proportional' }, { "plan.kind = 'proportional'", 'no emulation' } },
    { { 'plan.kind=fixed', 'plan.batches=60,4', 'workers=2', 'policy.max_batch=50,64' },
      { "'plan.batches[1]' must be <= 50", 'policy.max_batch' } },
    { { 'plan.kind=fixed', 'plan.batches=60,4', 'workers=2', 'emulation.memory.batch=1,64',
        'emulation.memory.mb=10,20', 'emulation.workers={{memory_mb = 15}, {}}' },
      { "'plan.batches[1]' must be <= 32", 'emulation.workers[1].memory_mb = 15 MB' } },
    -- accumulation: the worker holds one micro-batch at a time (26 samples fit), so it takes 2 x 26
    { { 'plan.kind=fixed', 'plan.batches=62,2', 'workers=2', 'emulation.memory.batch=1,64', 'accumulate=2',
        'emulation.memory.mb=10,20', 'emulation.workers={{memory_mb = 14}, {}}' },
      { "'plan.batches[1]' must be <= 52", 'emulation.workers[1].memory_mb = 14 MB' } },
    { { 'sync.mode=local', 'optimizer=adamw' }, { "sync.mode = 'local' trains with SGD on a classifier only" } },
    { { 'sync.mode=grouped', 'clip_grad_norm=1' }, { 'clip_grad_norm trains bsp' } },
    { { 'plan.kind=fixed', 'plan.batches=60,4', 'workers=2', 'policy.min_batch=5' },
      { "'plan.batches[2]' must be >= policy.min_batch = 5" } },
    { { 'plan.kind=fixed', 'plan.batches=64,0', 'workers=2', 'sync.mode=ksync' },
      { "sync.mode = 'ksync' needs samples on every worker", 'worker 1' } },
    { { 'plan.kind=fixed', 'plan.batches=64,0', 'workers=2', 'sync.mode=grouped', 'sync.groups=1,2' },
      { 'plan.batches gives group 2 no samples' } },
    { { 'sync.mode=grouped', 'sync.groups=1,3,3', 'workers=3' }, { 'sync.groups has no worker in group 2' } },
    { { 'sync.groups=1,2', 'workers=4' }, { 'sync.groups has 2 entries for 4 workers' } },
    { { 'sync.k=5', 'workers=4' }, { "'sync.k' must be between 0 and the number of workers (4), got 5" } },
    { { 'emulation.speeds=1,1', 'workers=4' }, { 'emulation.speeds has 2 entries for 4 workers' } },
    { { 'emulation.comm_delay_ms=1,2,3', 'workers=2' }, { 'emulation.comm_delay_ms has 3 entries for 2 workers' } },
    { { 'emulation.workers={{speed = 1}}', 'workers=2' }, { 'emulation.workers has 1 entries for 2 workers' } },
    { { 'emulation.events={{worker = 4, speed = 0.5}}', 'workers=2' },
      { "'emulation.events[1].worker' must be a worker from 0 to 1, got 4" } },
    { { 'emulation.events={{worker = 0, speed = 0.5, from = 10, to = 5}}' },
      { "'emulation.events[1].to' must be > from (10), got 5" } },
    { { 'emulation.random.duration=5,1' }, { "'emulation.random.duration' must be {min, max} with min <= max" } },
    { { 'emulation.random.speed=0.5' }, { "'emulation.random.speed' must be {min, max}, got 1 values" } },
    { { 'emulation.workers={{speed = 1, profile = {batch = {1, 64}, ms = {1}}}}' },
      { 'emulation.workers[1] has both a speed and a profile' } },
    { { 'emulation.workers={{profile = {batch = {1, 64}, ms = {1}}}}' },
      { 'emulation.workers[1].profile needs batch and ms lists of the same length (got 2 and 1 values)' } },
    { { 'emulation.memory.batch=64,1', 'emulation.memory.mb=1,2' }, { "'emulation.memory.batch' must increase" } },
    { { 'emulation.speed_trace=/no/such/trace.txt' }, { "emulation.speed_trace '/no/such/trace.txt' not found" } },
    { { 'faults={{rank = 3, iteration = 1}}', 'workers=2' }, { "'faults[1].rank' must be a worker from 0 to 1, got 3" } },
    { { 'devices=cpu,cpu', 'workers=3' }, { 'devices has 2 entries for 3 workers' } },
    { { 'policy.file=equal', 'policy.max_batch=1,1', 'workers=2', 'global_batch=5000' },
      { "no plan can satisfy the policy's bounds", 'add up to 2, less than global_batch = 5000 even in 1024' } },
    { { 'policy.file=equal', 'policy.min_batch=40', 'workers=2' },
      { "'policy.min_batch' must be <= 32 (global_batch 64 over 2 workers), got 40" } },
    { { 'policy.file=equal', 'policy.min_batch=12', 'policy.max_batch=10,60', 'workers=2' },
      { "worker 0's is 10 (policy.max_batch), got 12" } },
    { { 'policy.max_batch=10', 'workers=2' }, { 'policy.max_batch has 1 entries for 2 workers' } },
    { { 'policy.global_batch={min=128,max=256}' },
      { 'policy.global_batch = {min = 128, max = 256} does not hold global_batch = 64' } },
    { { 'policy.global_batch={max=32}' },
      { 'policy.global_batch = {min = 64, max = 32} does not hold global_batch = 64' } },
    { { 'policy.global_batch={max=100000}' }, { "'policy.global_batch.max' must be <= 60000" } },
    { { 'lr_scaling=cubic' }, { "'lr_scaling' must be one of" } },
    { { 'data.on_device=gpu' }, { "'data.on_device' must be one of" } },
    { { 'data.name=synthetic', 'data.on_device=always' },
      { "data.on_device = 'always' cannot hold the synthetic data set", 'not stored as a row of bytes' } },
    { { 'model_args.hiden=3' }, { "unknown key 'model_args.hiden'", "did you mean 'model_args.hidden'" } },
    { { 'model=lenet' }, { "unknown key 'model_args.hidden'", 'models/lenet.lua' }, 'in the file' },
    { { 'policy.file=/' }, { "policy '/' not found" } },
    { { 'model=/' }, { "model '/' not found" } },
    { { 'stop.epochs=1e300' }, { "'stop.epochs' must be <= 1000000000" } },
    { { 'faults=3' }, { "'faults' is a list of tables" } },
    { { 'faults={{rank = 0,' }, { "'faults' is not a Lua table" } },
    { { 'faults={{rank = 0, bogus = 1}}' }, { "unknown key 'faults[1].bogus'" } },
    { { 'faults={(function() while true do end end)()}' }, { 'takes too long' } },
    { { 'sync=bsp' }, { "'sync' is a table" } },
    { { 'model_args=5' }, { "'model_args' is a table" } },
  }
  for _, c in ipairs(cases) do
    local err = expect_user_error(base(), c[1], c[2], table.concat(c[1], ' '))
    if not c[3] then T.ok(err.message:find('override', 1, true), 'says which override: ' .. err.message) end
  end
  -- mpirun started 2 ranks by hand: the per-worker settings must fit 2, whatever `workers` says.
  local ok, kind, err = try_resolve(base(), { 'emulation.speeds=1,1,1,1', 'workers=4' }, 2)
  T.ok(not ok and kind == 'user' and err.message:find('emulation.speeds has 4 entries for 2 workers', 1, true),
       'checked against the ranks mpirun started: ' .. tostring(err and err.message or err))
  T.ok((try_resolve(base(), { 'emulation.speeds=1,0.5' }, 2)), 'two speeds for two ranks')
end)

T.test('good combinations pass', function()
  local cases = {
    { 'workers=4', 'global_batch=4' },
    { 'workers=4', 'plan.kind=fixed', 'plan.batches=0,0,0,64' },
    { 'workers=2', 'plan.kind=fixed', 'plan.batches=32,32', 'sync.mode=ksync', 'sync.k=2' },
    { 'workers=4', 'plan.kind=fixed', 'plan.batches=1,3,20,40', 'sync.mode=grouped', 'sync.groups=1,1,2,2' },
    { 'workers=2', 'plan.kind=fixed', 'plan.batches=32,32', 'emulation.memory.batch=1,64', 'emulation.memory.mb=10,20',
      'emulation.workers={{memory_mb = 15}, {}}' },
    { 'workers=2', 'plan.kind=proportional', 'emulation.speeds=1,0.5' },
    { 'workers=2', 'plan.kind=fixed', 'plan.batches=50,14', 'emulation.memory.batch=1,64', 'accumulate=2',
      'emulation.memory.mb=10,20', 'emulation.workers={{memory_mb = 14}, {}}' },
    { 'optimizer=adamw', 'beta1=0.8', 'beta2=0.95', 'eps=1e-6', 'clip_grad_norm=1', 'accumulate=4' },
    { 'faults={{rank = 1, iteration = 3, kind = "nan"}}', 'workers=2' },
    { 'emulation.events={{worker = 0, speed = 0.5, from = 1, to = 5}}' },
    { 'model_args={hidden = {16, 8}, dropout = 0.1}' },
    { 'model=lenet', 'model_args={}' },
    { 'eval_batch=1000000' },
  }
  for _, o in ipairs(cases) do
    local ok, kind, err = try_resolve(base(), o)
    T.ok(ok, table.concat(o, ' ') .. ': ' .. tostring(kind) .. ' ' ..
               tostring(type(err) == 'table' and err.message or err))
  end
  local ok, exp = try_resolve(base(), { 'eval_batch=1000000' })
  T.eq(ok and exp.eval_batch, 10000, 'an evaluation batch past the test set is the test set')
end)

-- Deterministic pseudo-random numbers (Park-Miller), so a failure repeats.
local seed = 20240611
local function rand(n)
  seed = (seed * 16807) % 2147483647
  return seed % n + 1
end
local function pick(list) return list[rand(#list)] end

local JUNK_TEXT = { '', '-1', '0', '1', '64', '1e400', '-1e400', 'nan', 'inf', '1.5', '0x10', '99999999999999999999',
                    'true', 'false', 'abc', "'x'", '{', '}', '{}', '{{}}', '{1,2}', '1,2,3', ',', '1,,2', '{[1]=2,[3]=4}',
                    'nil', '{nil}', '{x=1}', '{{rank=-1}}', '{{rank=0,iteration=1,kind="bogus"}}', '{1/0}', '{0/0}',
                    '{setmetatable}', '{(function() return 1 end)()}', '{{worker=0}}', 'bsp', 'grouped', 'fixed',
                    'fashion-mnist', 'synthetic', 'mlp', 'lenet', string.rep('9', 400), '{' .. string.rep('{', 300) }
local JUNK_KEYS = { 'x', 'global_bach', 'model_args.x', 'model_args.hidden', 'plan', 'sync', '.', 'a..b', '=', 'emulation',
                    'faults', 'emulation.workers', 'emulation.events', 'policy.params', 'policy.params.x' }

local function random_value(depth)
  local r = rand(depth > 2 and 9 or 11)
  if r == 1 then return nil end
  if r == 2 then return rand(2) == 1 end
  if r == 3 then return pick({ 0 / 0, 1 / 0, -1 / 0, -1, 0, 0.5, 1e300, 2 ^ 53 + 1, 64, 4, 1 }) end
  if r == 4 then return pick({ '', 'x', 'mlp', 'bsp', 'fixed', 'fashion-mnist', '1' }) end
  if r == 5 then return print end
  if r == 6 then return rand(100) - 10 end
  if r == 7 then return { 1, 2 } end
  if r == 8 then return setmetatable({}, { __index = function() error('metatable boom') end }) end
  if r == 9 then return coroutine.create(function() end) end
  local t = {}
  for _ = 1, rand(4) - 1 do
    local leaf = pick(LEAVES)
    local key = rand(3) == 1 and pick({ 1, 2, 'x', true, 1.5 }) or leaf.parts[rand(#leaf.parts)]
    t[key] = random_value(depth + 1)
  end
  return t
end

local function check_outcome(what, ok, kind, err)
  if not ok and kind == 'internal' then T.fail(what .. ': an internal error: ' .. tostring(err)) end
  if not ok and kind == 'user' then
    T.ok(#err.message > 0 and type(err.hint) == 'string' and #err.hint > 0, what .. ': message and hint')
  end
end

T.test('random overrides: resolved or rejected as user errors, never an internal error', function()
  local outcomes = { ok = 0, user = 0, model = 0 }
  for i = 1, 3000 do
    local overrides = {}
    for j = 1, rand(3) do
      local key = rand(4) == 1 and pick(JUNK_KEYS) or pick(LEAVES).path
      overrides[j] = key .. '=' .. pick(JUNK_TEXT)
    end
    local ok, kind, err = try_resolve(base(), overrides)
    check_outcome(string.format('case %d: %s', i, table.concat(overrides, ' ')), ok, kind, err)
    outcomes[ok and 'ok' or kind] = outcomes[ok and 'ok' or kind] + 1
  end
  T.ok(outcomes.user > 1500 and outcomes.ok > 100,
       string.format('resolved %d, user errors %d, model errors %d', outcomes.ok, outcomes.user, outcomes.model))
end)

T.test('random experiment tables: resolved or rejected as user errors, never an internal error', function()
  local outcomes = { ok = 0, user = 0, model = 0 }
  for i = 1, 3000 do
    local exp = base()
    for _ = 1, rand(3) do
      local leaf = pick(LEAVES)
      local parts = { unpack(leaf.parts, 1, rand(#leaf.parts)) }
      set_path(exp, parts, random_value(0))
    end
    if rand(20) == 1 then exp = random_value(0) end
    local ok, kind, err = try_resolve(exp, {})
    check_outcome('case ' .. i, ok, kind, err)
    outcomes[ok and 'ok' or kind] = outcomes[ok and 'ok' or kind] + 1
  end
  T.ok(outcomes.user > 1500 and outcomes.ok > 50,
       string.format('resolved %d, user errors %d, model errors %d', outcomes.ok, outcomes.user, outcomes.model))
end)

return T
