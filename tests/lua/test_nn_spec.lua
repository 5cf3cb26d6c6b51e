-- tandem.nn: the layer tables the constructors build, and errors that point at the
-- line of the model code that made the mistake (here: this file).
local T = require 'tandem.testing'
local nn = require 'tandem.nn'

local this_file = debug.getinfo(1, 'S').source:sub(2)
local function line() return debug.getinfo(2, 'l').currentline end
-- "file:line" as nn records it (relative to the tandem root when under it).
local function here(n)
  local path = this_file
  local root = package.tandem_root
  if root and path:sub(1, #root + 1) == root .. '/' then path = path:sub(#root + 2) end
  return path .. ':' .. n
end

T.test('linear: positional and table forms, bias as 0/1', function()
  local l, n = nn.linear(256), line()
  T.eq(l, { type = 'linear', args = { out = 256, bias = 1 }, where = here(n) })
  T.eq(nn.linear(10, { bias = false }).args, { out = 10, bias = 0 })
  T.eq(nn.linear(10, { ['in'] = 784 }).args, { out = 10, ['in'] = 784, bias = 1 })
  T.eq(nn.linear { out = 5, bias = true }.args, { out = 5, bias = 1 })
end)

T.test('conv2d: defaults stride 1, padding 0, bias', function()
  T.eq(nn.conv2d(6, 5).args, { out_channels = 6, kernel = 5, stride = 1, padding = 0, bias = 1 })
  T.eq(nn.conv2d(6, 5, { padding = 2, stride = 2, bias = false }).args,
       { out_channels = 6, kernel = 5, stride = 2, padding = 2, bias = 0 })
  T.eq(nn.conv2d { out_channels = 16, kernel = 3, in_channels = 6 }.args,
       { out_channels = 16, kernel = 3, stride = 1, padding = 0, bias = 1, in_channels = 6 })
end)

T.test('maxpool2d: stride defaults to the kernel', function()
  T.eq(nn.maxpool2d(2).args, { kernel = 2, stride = 2 })
  T.eq(nn.maxpool2d(3, 1).args, { kernel = 3, stride = 1 })
  T.eq(nn.maxpool2d { kernel = 2 }.args, { kernel = 2, stride = 2 })
end)

T.test('relu, flatten, dropout', function()
  local r, n = nn.relu(), line()
  T.eq(r, { type = 'relu', args = {}, where = here(n) })
  T.eq(nn.flatten().type, 'flatten')
  T.eq(nn.dropout(0.5).args, { p = 0.5 })
  T.eq(nn.dropout { p = 0 }.args, { p = 0 })
end)

T.test('argument errors point at the calling line', function()
  local n
  local err = T.raises(function() n = line(); nn.linear('ten') end, "'out' must be a positive integer")
  T.ok(err:find(here(n), 1, true), 'error names this line: ' .. err)
  err = T.raises(function() n = line(); nn.conv2d(6, 5, { padding = -1 }) end, "'padding' must be a non-negative")
  T.ok(err:find(here(n), 1, true), 'error names this line: ' .. err)
  err = T.raises(function() n = line(); nn.dropout(1) end, "'p' must be a number in [0, 1)")
  T.ok(err:find(here(n), 1, true), 'error names this line: ' .. err)
  err = T.raises(function() n = line(); nn.maxpool2d(0) end, "'kernel' must be a positive integer")
  T.ok(err:find(here(n), 1, true), 'error names this line: ' .. err)
  T.raises(function() nn.linear(2.5) end, 'positive integer')
  T.raises(function() nn.linear(10, { bias = 'yes' }) end, "'bias' must be true or false")
  T.raises(function() nn.relu(3) end, 'nn.relu takes no arguments')
end)

T.test('unknown options are named, with the nearest known one', function()
  local n
  local err = T.raises(function() n = line(); nn.linear(10, { bais = false }) end,
                       "nn.linear: unknown option 'bais' (did you mean 'bias'?)")
  T.ok(err:find(here(n), 1, true), 'error names this line: ' .. err)
  T.raises(function() nn.conv2d(6, 5, { strides = 2 }) end, "(did you mean 'stride'?)")
  T.raises(function() nn.model { name = 'm', layer = {} } end, "unknown option 'layer' (did you mean 'layers'?)")
end)

T.test('model: flattens nested blocks and records where', function()
  local block = { nn.linear(32), nn.relu() }
  local m, n = nn.model { name = 'net', layers = { nn.flatten(), block, { nn.linear(10) } } }, line()
  T.eq(m.name, 'net')
  T.eq(m.where, here(n))
  T.eq(#m.layers, 4)
  T.eq(m.layers[2].type, 'linear')
  T.eq(m.layers[3].type, 'relu')
  T.eq(m.layers[4].args.out, 10)
  T.eq(nn.check_model(m), nil)
  T.eq(nn.model { layers = { nn.relu() } }.name, 'model')
end)

T.test('model: a constructor without () is caught', function()
  local n
  local err = T.raises(function()
    n = line(); nn.model { layers = { nn.flatten(), nn.relu, nn.linear(10) } }
  end, 'layer 2 is the function nn.relu itself: write nn.relu(...)')
  T.ok(err:find(here(n), 1, true), 'error names this line: ' .. err)
end)

T.test('model: malformed layers and empty lists are rejected', function()
  T.raises(function() nn.model { layers = {} } end, "'layers' is empty")
  T.raises(function() nn.model { layers = { { type = 'softmax', args = {} } } } end, "unknown type 'softmax'")
  T.raises(function() nn.model { layers = { { type = 'linear', args = { out = 'x' } } } } end,
           "layer arguments are finite numbers")
  T.raises(function() nn.model 'mlp' end, 'expected a table')
  T.ok(nn.check_model({ name = 'x', layers = { 5 } }):find('layer 1 is 5', 1, true))
  T.ok(nn.check_model(nil) ~= nil)
end)

T.test('the bundled models build the documented layers', function()
  local mlp = dofile(package.tandem_root .. '/models/mlp.lua')({ input = { 1, 28, 28 }, classes = 10 })
  local types = {}
  for i, l in ipairs(mlp.layers) do types[i] = l.type end
  T.eq(types, { 'flatten', 'linear', 'relu', 'linear', 'relu', 'linear' })
  T.eq(mlp.layers[2].args.out, 256)
  T.eq(mlp.layers[6].args.out, 10)
  local drop = dofile(package.tandem_root .. '/models/mlp.lua')({ classes = 3, hidden = { 8 }, dropout = 0.25 })
  types = {}
  for i, l in ipairs(drop.layers) do types[i] = l.type end
  T.eq(types, { 'flatten', 'linear', 'relu', 'dropout', 'linear' })

  local lenet = dofile(package.tandem_root .. '/models/lenet.lua')({ input = { 1, 28, 28 }, classes = 10 })
  types = {}
  for i, l in ipairs(lenet.layers) do types[i] = l.type end
  T.eq(types, { 'conv2d', 'relu', 'maxpool2d', 'conv2d', 'relu', 'maxpool2d', 'flatten', 'linear', 'relu', 'linear',
                'relu', 'linear' })
  T.eq(lenet.layers[1].args.padding, 2)
  T.eq(lenet.layers[4].args.padding, 0)
  T.eq(lenet.layers[12].args.out, 10)
end)

T.test('the testing helpers themselves', function()
  T.eq({ a = { 1, 2 } }, { a = { 1, 2 } })
  T.raises(function() T.eq({ a = { 1, 2 } }, { a = { 1, 3 } }) end, 'at a.2')
  T.near(0.1 + 0.2, 0.3, 1e-12)
  T.near({ 1, 2 }, { 1, 2.0000001 }, 1e-6)
  T.raises(function() T.near(1, 2, 0.5) end, 'within 0.5')
  T.raises(function() T.raises(function() end) end, 'none was raised')
  T.raises(function() T.raises(function() error('abc') end, 'xyz') end, "does not contain 'xyz'")
  T.eq(T.raises(function() error({ message = 'structured' }) end, 'structured'), 'structured')
end)

T.test('residual: body and shortcut are layer lists; batchnorm and avgpool take options or none', function()
  local r = nn.residual { body = { nn.conv2d(8, 3, { padding = 1 }), { nn.batchnorm(), nn.relu() } },
                          shortcut = { nn.conv2d(8, 1) } }
  T.eq(r.type, 'residual')
  T.eq(#r.body, 3)  -- nested lists flatten
  T.eq(r.body[2].args, { eps = 1e-5, momentum = 0.1, sync = 1 })
  T.eq(#r.shortcut, 1)
  T.eq(nn.residual { body = { nn.relu() } }.shortcut, nil)
  T.eq(nn.batchnorm { sync = false, momentum = 0.2 }.args, { eps = 1e-5, momentum = 0.2, sync = 0 })
  T.eq(nn.avgpool().type, 'avgpool')
  T.raises(function() nn.residual { body = {} } end, "'body' is empty")
  T.raises(function() nn.residual { shortcut = {} } end, "'body' must be a list of layers")
  T.raises(function() nn.batchnorm { eps = 0 } end, "'eps' must be a number > 0")
  T.raises(function() nn.avgpool(2) end, 'takes no arguments')
  local m = nn.model { layers = { r, nn.avgpool(), nn.linear(10) } }
  T.eq(nn.check_model(m), nil)
end)

T.test('GPT layers: embedding, transformer_block, layernorm, lm_head with defaults and checks', function()
  local e, n = nn.embedding { n_embd = 16, seq_len = 8 }, line()
  T.eq(e, { type = 'embedding', args = { n_embd = 16, seq_len = 8, dropout = 0 }, where = here(n) })
  T.eq(nn.embedding { n_embd = 4, seq_len = 2, vocab = 11, dropout = 0.1 }.args,
       { n_embd = 4, seq_len = 2, vocab = 11, dropout = 0.1 })
  T.eq(nn.transformer_block { n_head = 4 }.args, { n_head = 4, dropout = 0, n_layer = 1 })
  T.eq(nn.transformer_block { n_head = 2, dropout = 0.2, n_layer = 6 }.args, { n_head = 2, dropout = 0.2, n_layer = 6 })
  T.eq(nn.layernorm().args, { eps = 1e-5 })
  T.eq(nn.layernorm { eps = 1e-6 }.args, { eps = 1e-6 })
  T.eq(nn.lm_head().args, { tied = 1 })
  T.eq(nn.lm_head { tied = false, vocab = 7 }.args, { tied = 0, vocab = 7 })
  local err = T.raises(function() n = line(); nn.embedding { n_embd = 16 } end, "nn.embedding: 'seq_len' must be a positive integer")
  T.ok(err:find(here(n), 1, true), 'error names this line: ' .. err)
  T.raises(function() nn.embedding { n_embd = 8, seq_len = 4, dropout = 1 } end, "'dropout' must be a number in [0, 1)")
  T.raises(function() nn.embedding { n_emb = 8, seq_len = 4 } end, "unknown option 'n_emb' (did you mean 'n_embd'?)")
  T.raises(function() nn.transformer_block {} end, "nn.transformer_block: 'n_head' must be a positive integer")
  T.raises(function() nn.transformer_block { n_head = 2, n_layer = 0 } end, "'n_layer' must be a positive integer")
  T.raises(function() nn.transformer_block { n_heads = 2 } end, "(did you mean 'n_head'?)")
  T.raises(function() nn.layernorm { eps = -1 } end, "nn.layernorm: 'eps' must be a number > 0")
  T.raises(function() nn.lm_head { tied = 1 } end, "nn.lm_head: 'tied' must be true or false")
  T.raises(function() nn.lm_head { vocab = 7 } end, "'vocab' is the embedding's when tied")
  local m = nn.model { layers = { e, nn.transformer_block { n_head = 4 }, nn.layernorm(), nn.lm_head() } }
  T.eq(nn.check_model(m), nil)
end)

T.test('the bundled gpt: embedding, n_layer blocks, layernorm, tied head; seq_len from the input', function()
  local gpt = dofile(package.tandem_root .. '/models/gpt.lua')
  local m = gpt({ input = { 32 }, classes = 256 })
  local types = {}
  for i, l in ipairs(m.layers) do types[i] = l.type end
  T.eq(types, { 'embedding', 'transformer_block', 'transformer_block', 'layernorm', 'lm_head' })
  T.eq(m.layers[1].args, { n_embd = 128, seq_len = 32, vocab = 256, dropout = 0, padded_vocab = 256 })
  T.eq(m.layers[2].args, { n_head = 4, dropout = 0, n_layer = 2 })
  T.eq(m.layers[5].args, { tied = 1 })
  m = gpt({ input = { 16 }, classes = 11, n_layer = 3, n_head = 2, n_embd = 8, seq_len = 20, dropout = 0.1 })
  T.eq(#m.layers, 6)
  T.eq(m.layers[1].args, { n_embd = 8, seq_len = 20, vocab = 11, dropout = 0.1, padded_vocab = 64 })
  -- The vocabulary padded to a multiple of vocab_multiple (64: GPT-2's 50257 to 50304).
  T.eq(gpt({ input = { 8 }, classes = 50257 }).layers[1].args.padded_vocab, 50304)
  T.eq(gpt({ input = { 8 }, classes = 50257, vocab_multiple = 1 }).layers[1].args.padded_vocab, 50257)
  T.eq(gpt({ input = { 8 }, classes = 300, vocab_multiple = 100 }).layers[1].args.padded_vocab, 300)
  T.raises(function() gpt({ input = { 8 }, classes = 256, vocab_multiple = 0 }) end,
           'model_args.vocab_multiple must be a positive')
  T.raises(function() nn.embedding { n_embd = 8, seq_len = 4, vocab = 10, padded_vocab = 9 } end, 'pad up, never down')
  T.eq(m.layers[4].args, { n_head = 2, dropout = 0.1, n_layer = 3 })
  T.eq(gpt({ classes = 5 }).layers[1].args.seq_len, 64)
  T.raises(function() gpt({ input = { 65 }, classes = 256, seq_len = 64 }) end, 'raise seq_len')
  T.raises(function() gpt({ input = { 1, 28, 28 }, classes = 10 }) end, 'sample shape {seq}')
  T.raises(function() gpt({ input = { 8 }, classes = 256, n_head = 3 }) end, 'does not divide n_embd')
  T.raises(function() gpt({ input = { 8 }, classes = 256, vocab = 100 }) end, 'leave vocab out')
  T.raises(function() gpt({ input = { 8 }, classes = 256, n_layer = 0 }) end, 'model_args.n_layer must be a positive')
end)

return T
