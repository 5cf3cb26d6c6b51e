-- tandem.nn: the constructors model files use to describe a network as data.
--
-- A layer is a plain table {type = 'linear', args = {out = 256, bias = 1},
-- where = 'models/mlp.lua:12'}: numbers only in args (booleans as 0/1), so the
-- engine (engine/nn/model.cpp) can build it without calling back into Lua, and
-- `where` is the model file's line, so any later complaint about the layer points
-- at the line that wrote it. Input sizes are left out: the engine infers each
-- layer's input from the one before.
--
-- Argument mistakes are raised at the first stack level outside this file (the
-- model file's line), not here: the user has nothing to fix in nn.lua.
local nn = {}

-- Layer types the engine builds, with the options each constructor accepts.
nn.layer_types = { 'linear', 'relu', 'conv2d', 'maxpool2d', 'batchnorm', 'avgpool', 'residual', 'flatten', 'dropout',
                   'embedding', 'transformer_block', 'layernorm', 'lm_head' }

local this_source = debug.getinfo(1, 'S').source
-- The tandem Lua library (scripts/tandem/): its frames are never the user's line.
local library_dir = this_source:match('^(@.*/)[^/]*$')

local function in_library(source)
  return library_dir ~= nil and source:sub(1, #library_dir) == library_dir
end

-- The first Lua stack level outside this file, counted from the function that calls
-- this one (so it can be handed to error()); nil if there is none, or if it lies in
-- the library: the user's frame is gone when the model file made a tail call
-- (`return nn.model{...}`), and LuaJIT leaves no trace of it.
local function user_level()
  local level = 3  -- 1: user_level, 2: its caller; the user is further up
  while true do
    local info = debug.getinfo(level, 'S')
    if not info then return nil end
    if info.source ~= this_source and info.what ~= 'C' then
      if in_library(info.source) then return nil end
      return level - 1
    end
    level = level + 1
  end
end

local function shorten(source)
  local path = source:sub(1, 1) == '@' and source:sub(2) or source
  local root = package.tandem_root
  if root and path:sub(1, #root + 1) == root .. '/' then path = path:sub(#root + 2) end
  return path
end

-- "file:line" of the user code that called into nn, or nil when unknown.
local function caller_where()
  local level = user_level()
  if not level then return nil end
  local info = debug.getinfo(level, 'Sl')
  return shorten(info.source) .. ':' .. tostring(info.currentline or 0)
end

-- Raises msg at the user's line; when that is unknown, prefixed with `fallback`
-- (a "file:line" known otherwise, e.g. a neighbouring layer's).
-- The experiment loader sets nn.building to the model file it is running, the last
-- resort for locating an error.
local function fail_near(fallback, fmt, ...)
  local msg = string.format(fmt, ...)
  local level = user_level()
  if level then error(msg, level) end
  fallback = fallback or nn.building
  error(fallback and (fallback .. ': ' .. msg) or msg, 0)
end

local function fail(fmt, ...)
  fail_near(nil, fmt, ...)
end

local function show(v)
  if type(v) == 'string' then return string.format('%q', v) end
  if type(v) == 'table' or type(v) == 'function' then return 'a ' .. type(v) end
  return tostring(v)
end

local distance = require('tandem.text').distance

-- Rejects option keys a constructor does not know, naming the closest known one.
local function check_options(ctor, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= 'table' then fail('nn.%s: options must be a table, got %s', ctor, show(opts)) end
  local keys = {}
  for k in pairs(opts) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local known = false
    for _, a in ipairs(allowed) do known = known or a == k end
    if not known then
      local best, best_d
      if type(k) == 'string' then
        for _, a in ipairs(allowed) do
          local d = distance(k, a)
          if not best_d or d < best_d then best, best_d = a, d end
        end
      end
      local hint = best and best_d <= 2 and string.format(" (did you mean '%s'?)", best) or ''
      fail("nn.%s: unknown option '%s'%s; options are %s", ctor, tostring(k), hint, table.concat(allowed, ', '))
    end
  end
  return opts
end

local function is_int(v) return type(v) == 'number' and v == math.floor(v) and v > -math.huge and v < math.huge end

local function positive_int(ctor, name, v)
  if not (is_int(v) and v >= 1) then fail("nn.%s: '%s' must be a positive integer, got %s", ctor, name, show(v)) end
  return v
end

local function non_negative_int(ctor, name, v)
  if not (is_int(v) and v >= 0) then fail("nn.%s: '%s' must be a non-negative integer, got %s", ctor, name, show(v)) end
  return v
end

local function flag(ctor, name, v, default)
  if v == nil then v = default end
  if type(v) ~= 'boolean' then fail("nn.%s: '%s' must be true or false, got %s", ctor, name, show(v)) end
  return v and 1 or 0
end

local function probability(ctor, name, v)
  if not (type(v) == 'number' and v >= 0 and v < 1) then
    fail("nn.%s: '%s' must be a number in [0, 1), got %s", ctor, name, show(v))
  end
  return v
end

local function no_arguments(ctor, n)
  if n > 0 then fail('nn.%s takes no arguments', ctor) end
end

local function layer(type_, args, where)
  return { type = type_, args = args, where = where or '?' }
end

-- nn.linear(out [, {in = ..., bias = true}]) or nn.linear{out = ..., in = ..., bias = ...}
function nn.linear(out, opts)
  local where = caller_where()
  if type(out) == 'table' and opts == nil then
    opts = check_options('linear', out, { 'out', 'in', 'bias' })
    out = opts.out
  else
    opts = check_options('linear', opts, { 'in', 'bias' })
  end
  local args = { out = positive_int('linear', 'out', out), bias = flag('linear', 'bias', opts.bias, true) }
  if opts['in'] ~= nil then args['in'] = positive_int('linear', 'in', opts['in']) end
  local l = layer('linear', args, where)
  return l
end

-- nn.conv2d(out_channels, kernel [, {stride = 1, padding = 0, bias = true, in_channels = ...}])
-- or nn.conv2d{out_channels = ..., kernel = ..., stride = ..., ...}
function nn.conv2d(out_channels, kernel, opts)
  local where = caller_where()
  local allowed = { 'stride', 'padding', 'bias', 'in_channels' }
  if type(out_channels) == 'table' and kernel == nil and opts == nil then
    opts = check_options('conv2d', out_channels, { 'out_channels', 'kernel', 'stride', 'padding', 'bias', 'in_channels' })
    out_channels, kernel = opts.out_channels, opts.kernel
  else
    opts = check_options('conv2d', opts, allowed)
  end
  local args = {
    out_channels = positive_int('conv2d', 'out_channels', out_channels),
    kernel = positive_int('conv2d', 'kernel', kernel),
    stride = positive_int('conv2d', 'stride', opts.stride == nil and 1 or opts.stride),
    padding = non_negative_int('conv2d', 'padding', opts.padding == nil and 0 or opts.padding),
    bias = flag('conv2d', 'bias', opts.bias, true),
  }
  if opts.in_channels ~= nil then args.in_channels = positive_int('conv2d', 'in_channels', opts.in_channels) end
  local l = layer('conv2d', args, where)
  return l
end

-- nn.maxpool2d(kernel [, stride = kernel]) or nn.maxpool2d{kernel = ..., stride = ...}
function nn.maxpool2d(kernel, stride)
  local where = caller_where()
  if type(kernel) == 'table' and stride == nil then
    local opts = check_options('maxpool2d', kernel, { 'kernel', 'stride' })
    kernel, stride = opts.kernel, opts.stride
  end
  kernel = positive_int('maxpool2d', 'kernel', kernel)
  local l = layer('maxpool2d', { kernel = kernel, stride = positive_int('maxpool2d', 'stride', stride or kernel) },
                  where)
  return l
end

function nn.relu(...)
  local where = caller_where()
  no_arguments('relu', select('#', ...))
  local l = layer('relu', {}, where)
  return l
end

function nn.flatten(...)
  local where = caller_where()
  no_arguments('flatten', select('#', ...))
  local l = layer('flatten', {}, where)
  return l
end

-- nn.batchnorm([{eps = 1e-5, momentum = 0.1, sync = true}]): batch normalisation of
-- the channels (after conv2d) or features (after linear). sync = true (default)
-- normalises with the statistics of the whole global batch, however it is split
-- over workers; false, with each worker's own (engine/nn/batchnorm.hpp).
function nn.batchnorm(opts)
  local where = caller_where()
  opts = check_options('batchnorm', opts, { 'eps', 'momentum', 'sync' })
  local eps, momentum = opts.eps == nil and 1e-5 or opts.eps, opts.momentum == nil and 0.1 or opts.momentum
  if not (type(eps) == 'number' and eps > 0) then fail("nn.batchnorm: 'eps' must be a number > 0, got %s", show(eps)) end
  if not (type(momentum) == 'number' and momentum >= 0 and momentum <= 1) then
    fail("nn.batchnorm: 'momentum' must be a number in [0, 1], got %s", show(momentum))
  end
  local l = layer('batchnorm', { eps = eps, momentum = momentum, sync = flag('batchnorm', 'sync', opts.sync, true) },
                  where)
  return l
end

-- nn.avgpool(): global average pooling, [C, H, W] -> [C].
function nn.avgpool(...)
  local where = caller_where()
  no_arguments('avgpool', select('#', ...))
  local l = layer('avgpool', {}, where)
  return l
end

-- nn.residual{body = {layers...}, shortcut = {layers...}}: y = relu(body(x) +
-- shortcut(x)), the shortcut being the identity when not given (He et al., 2016).
-- body and shortcut must produce the same shape.
local flatten_layers
function nn.residual(t)
  local where = caller_where()
  local opts = check_options('residual', t, { 'body', 'shortcut' })
  if type(opts.body) ~= 'table' then fail("nn.residual: 'body' must be a list of layers, got %s", show(opts.body)) end
  local l = layer('residual', {}, where)
  l.body = {}
  flatten_layers(opts.body, l.body, 'body.', where)
  if #l.body == 0 then fail("nn.residual: 'body' is empty") end
  if opts.shortcut ~= nil then
    if type(opts.shortcut) ~= 'table' then
      fail("nn.residual: 'shortcut' must be a list of layers, got %s", show(opts.shortcut))
    end
    l.shortcut = {}
    flatten_layers(opts.shortcut, l.shortcut, 'shortcut.', where)
  end
  return l
end

-- nn.dropout(p) or nn.dropout{p = ...}: p is the probability of dropping a value.
function nn.dropout(p)
  local where = caller_where()
  if type(p) == 'table' then p = check_options('dropout', p, { 'p' }).p end
  local l = layer('dropout', { p = probability('dropout', 'p', p) }, where)
  return l
end

-- A GPT's layers (models/gpt.lua; engine/nn/transformer_block.hpp has the block's
-- parameter layout).

-- nn.embedding{n_embd = ..., seq_len = ..., vocab = classes, dropout = 0,
-- padded_vocab = vocab}: token plus position embedding of [seq] token ids (seq <=
-- seq_len) to [seq, n_embd], then dropout. vocab defaults to the data set's classes;
-- padded_vocab (at least vocab) is the table's rows, a round number for the tied
-- head's GEMM (the rows past vocab are never read or predicted).
function nn.embedding(opts)
  local where = caller_where()
  opts = check_options('embedding', opts, { 'n_embd', 'seq_len', 'vocab', 'dropout', 'padded_vocab' })
  local args = {
    n_embd = positive_int('embedding', 'n_embd', opts.n_embd),
    seq_len = positive_int('embedding', 'seq_len', opts.seq_len),
    dropout = probability('embedding', 'dropout', opts.dropout == nil and 0 or opts.dropout),
  }
  if opts.vocab ~= nil then args.vocab = positive_int('embedding', 'vocab', opts.vocab) end
  if opts.padded_vocab ~= nil then
    args.padded_vocab = positive_int('embedding', 'padded_vocab', opts.padded_vocab)
    if args.vocab and args.padded_vocab < args.vocab then
      fail('nn.embedding: padded_vocab = %d is smaller than vocab = %d; pad up, never down', args.padded_vocab,
           args.vocab)
    end
  end
  local l = layer('embedding', args, where)
  return l
end

-- nn.transformer_block{n_head = ..., dropout = 0, n_layer = 1}: a GPT-2 pre-norm block
-- with causal self-attention on [seq, n_embd]; n_head must divide n_embd. n_layer
-- (the model's number of blocks) scales the init of the residual projections.
function nn.transformer_block(opts)
  local where = caller_where()
  opts = check_options('transformer_block', opts, { 'n_head', 'dropout', 'n_layer' })
  local l = layer('transformer_block', {
    n_head = positive_int('transformer_block', 'n_head', opts.n_head),
    dropout = probability('transformer_block', 'dropout', opts.dropout == nil and 0 or opts.dropout),
    n_layer = positive_int('transformer_block', 'n_layer', opts.n_layer == nil and 1 or opts.n_layer),
  }, where)
  return l
end

-- nn.layernorm([{eps = 1e-5}]): layer normalisation over the last dimension.
function nn.layernorm(opts)
  local where = caller_where()
  opts = check_options('layernorm', opts, { 'eps' })
  local eps = opts.eps == nil and 1e-5 or opts.eps
  if not (type(eps) == 'number' and eps > 0) then fail("nn.layernorm: 'eps' must be a number > 0, got %s", show(eps)) end
  local l = layer('layernorm', { eps = eps }, where)
  return l
end

-- nn.lm_head([{tied = true, vocab = classes}]): logits [seq, vocab] from [seq, n_embd].
-- tied (GPT-2): shares the weight of the nearest embedding before it; otherwise an
-- own weight of vocab rows (vocab defaults to the data set's classes).
function nn.lm_head(opts)
  local where = caller_where()
  opts = check_options('lm_head', opts, { 'tied', 'vocab' })
  local args = { tied = flag('lm_head', 'tied', opts.tied, true) }
  if opts.vocab ~= nil then
    if args.tied == 1 then fail("nn.lm_head: 'vocab' is the embedding's when tied; give it only with tied = false") end
    args.vocab = positive_int('lm_head', 'vocab', opts.vocab)
  end
  local l = layer('lm_head', args, where)
  return l
end

local known_type = {}
for _, t in ipairs(nn.layer_types) do known_type[t] = true end

-- nil if l is a well-formed layer table, else what is wrong with it.
local function layer_problem(l)
  if type(l) ~= 'table' then return 'is ' .. show(l) .. ', not a layer' end
  if type(l.type) ~= 'string' then return "has no 'type'" end
  if not known_type[l.type] then
    return string.format("has unknown type '%s' (known: %s)", l.type, table.concat(nn.layer_types, ', '))
  end
  if type(l.args) ~= 'table' then return "has no 'args' table" end
  for k, v in pairs(l.args) do
    if type(k) ~= 'string' then return 'has a non-name argument key ' .. show(k) end
    if type(v) ~= 'number' or v ~= v or v == math.huge or v == -math.huge then
      return string.format("has argument '%s' = %s; layer arguments are finite numbers", k, show(v))
    end
  end
  if l.where ~= nil and type(l.where) ~= 'string' then return "has a non-string 'where'" end
  for _, part in ipairs({ 'body', 'shortcut' }) do
    local list = l[part]
    if list ~= nil then
      if l.type ~= 'residual' then return string.format("has a '%s' list but is not a residual block", part) end
      if type(list) ~= 'table' then return string.format("has a '%s' that is not a list", part) end
      for i, sub in ipairs(list) do
        local problem = layer_problem(sub)
        if problem then return string.format('%s layer %d %s', part, i, problem) end
      end
    end
  end
  if l.type == 'residual' and (type(l.body) ~= 'table' or #l.body == 0) then return "has no 'body' layers" end
  return nil
end

-- The `where` of a layer next to position i of list (the one before it, else the
-- one after), to locate a bad entry when the user's line is unknown.
local function neighbour_where(list, i, out)
  local before = out[#out]
  if before and before.where ~= '?' then return before.where end
  local after = list[i + 1]
  if type(after) == 'table' and type(after.where) == 'string' and after.where ~= '?' then return after.where end
  return nil
end

-- Appends the layers of `list` to `out`, splicing nested lists (blocks of layers).
function flatten_layers(list, out, label, fallback)
  for i = 1, #list do
    local l = list[i]
    local at = label .. tostring(i)
    local near = neighbour_where(list, i, out) or fallback
    if type(l) == 'function' then
      for _, t in ipairs(nn.layer_types) do
        if l == nn[t] then fail_near(near, 'nn.model: layer %s is the function nn.%s itself: write nn.%s(...)', at, t, t) end
      end
      fail_near(near, 'nn.model: layer %s is a function, not a layer', at)
    elseif type(l) == 'table' and l.type == nil and #l > 0 then
      flatten_layers(l, out, at .. '.', near)
    else
      local problem = layer_problem(l)
      if problem then fail_near(near, 'nn.model: layer %s %s', at, problem) end
      out[#out + 1] = l
    end
  end
end

-- nn.model{name = ..., layers = {...}}: what a model file's function returns. Nested
-- lists inside layers are spliced in order, so blocks can be built by helper functions.
function nn.model(t)
  local where = caller_where()
  if type(t) ~= 'table' then fail('nn.model: expected a table {name = ..., layers = {...}}, got %s', show(t)) end
  check_options('model', t, { 'name', 'layers' })
  if t.name ~= nil and type(t.name) ~= 'string' then fail("nn.model: 'name' must be a string, got %s", show(t.name)) end
  if type(t.layers) ~= 'table' then fail("nn.model: 'layers' must be a list of layers, got %s", show(t.layers)) end
  local layers = {}
  flatten_layers(t.layers, layers, '', where)
  if #layers == 0 then fail("nn.model: 'layers' is empty") end
  local m = { name = t.name or 'model', layers = layers, where = where or layers[1].where }
  return m
end

-- nil if m is a well-formed model (what nn.model returns), else what is wrong with it.
-- The experiment loader checks every model with this, whoever built it.
function nn.check_model(m)
  if type(m) ~= 'table' then return 'is ' .. show(m) .. ', not nn.model{...}' end
  if type(m.name) ~= 'string' then return "has no 'name' string" end
  if type(m.layers) ~= 'table' or #m.layers == 0 then return "has no 'layers' list" end
  for i, l in ipairs(m.layers) do
    local problem = layer_problem(l)
    if problem then return string.format('layer %d %s', i, problem) end
  end
  return nil
end

return nn
