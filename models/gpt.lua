-- A GPT-2 style language model (Radford et al., 2019; nanoGPT's layout): token and
-- position embedding, n_layer pre-norm transformer blocks with causal self-attention,
-- a final layer norm and an output projection tied to the token embedding. Every
-- position predicts the next token: the logits are [seq, vocab] per sample and the
-- labels one token per position (the data gives sample shape {seq} and the vocab as
-- its classes, 256 for byte tokens).
-- model_args: n_layer (default 2), n_head (4), n_embd (128), seq_len (the input's
-- length; 64 without one; the input may be shorter, never longer), dropout (0: embd,
-- attention and residual dropout, as GPT-2's pdrop), vocab (the data's classes; must
-- equal them, as the tied head predicts one of vocab tokens), vocab_multiple (64:
-- the token table's rows and the head's logits are padded to a multiple of it, as
-- llm.c pads GPT-2's 50257 to 50304, for the GEMM's sake; the padded logits are never
-- predicted and change no result; 1: no padding; a byte vocabulary's 256 needs none).
-- preset: 'gpt2' | 'gpt2-medium' | 'gpt2-large' | 'gpt2-xl', the published sizes
-- (Radford et al., 2019; Hugging Face's configs): n_layer, n_head and n_embd set by
-- the preset (giving one of them too is an error), a context of at most 1,024
-- tokens (data.seq_len up to 1024; a checkpoint's longer position embedding is cut
-- to it by init_from). With data.vocab = 50257 they are GPT-2's 124M, 350M, 774M
-- and 1.56B parameters (the tied head counted once).
-- The parameter layout (what a PyTorch replay follows) is in
-- engine/nn/transformer_block.hpp.
local nn = require 'tandem.nn'

local PRESETS = {
  ['gpt2'] = { n_layer = 12, n_head = 12, n_embd = 768 },
  ['gpt2-medium'] = { n_layer = 24, n_head = 16, n_embd = 1024 },
  ['gpt2-large'] = { n_layer = 36, n_head = 20, n_embd = 1280 },
  ['gpt2-xl'] = { n_layer = 48, n_head = 25, n_embd = 1600 },
}
local PRESET_CONTEXT = 1024

return function(args)
  local preset = args.preset
  if preset ~= nil then
    local sizes = PRESETS[preset]
    if not sizes then
      error(string.format("gpt: model_args.preset = %s is not a GPT-2 size; use 'gpt2', 'gpt2-medium', "
                            .. "'gpt2-large' or 'gpt2-xl'", tostring(preset)), 0)
    end
    for _, k in ipairs({ 'n_layer', 'n_head', 'n_embd' }) do
      if args[k] ~= nil then
        error(string.format("gpt: model_args.%s is set by preset = %s (%d); leave it out, or leave the preset out "
                              .. "(on the command line, give model_args whole: 'model_args={preset = \"%s\"}')",
                            k, preset, sizes[k], preset), 0)
      end
    end
    local length = type(args.input) == 'table' and args.input[1] or nil
    if length and length > PRESET_CONTEXT then
      error(string.format('gpt: preset = %s has a context of %d tokens; data.seq_len = %d is longer', preset,
                          PRESET_CONTEXT, length), 0)
    end
    args.n_layer, args.n_head, args.n_embd = sizes.n_layer, sizes.n_head, sizes.n_embd
  end
  local function int_arg(name, default)
    local v = args[name]
    if v == nil then return default end
    if type(v) ~= 'number' or v ~= math.floor(v) or v < 1 then
      error(string.format('gpt: model_args.%s must be a positive integer, got %s', name, tostring(v)), 0)
    end
    return v
  end
  local n_layer, n_head, n_embd = int_arg('n_layer', 2), int_arg('n_head', 4), int_arg('n_embd', 128)
  local input = args.input
  local length = type(input) == 'table' and input[1] or nil
  if type(input) == 'table' and #input ~= 1 then
    error(string.format('gpt: the data must give token sequences (sample shape {seq}), got a shape of %d dimensions',
                        #input), 0)
  end
  local seq_len = int_arg('seq_len', length or 64)
  if length and length > seq_len then
    error(string.format('gpt: the data gives sequences of %d tokens but model_args.seq_len is %d; raise seq_len or '
                          .. 'shorten data sequences', length, seq_len), 0)
  end
  local vocab = int_arg('vocab', args.classes)
  if vocab ~= args.classes then
    error(string.format('gpt: model_args.vocab = %s but the data has %s classes; the tied head predicts one of vocab '
                          .. 'tokens, so leave vocab out (it defaults to the classes)', tostring(vocab),
                        tostring(args.classes)), 0)
  end
  if n_embd % n_head ~= 0 then
    error(string.format('gpt: model_args.n_head = %d does not divide n_embd = %d', n_head, n_embd), 0)
  end
  local multiple = int_arg('vocab_multiple', 64)
  local padded_vocab = math.ceil(vocab / multiple) * multiple
  local dropout = args.dropout or 0
  if type(dropout) ~= 'number' or dropout < 0 or dropout >= 1 then
    error('gpt: model_args.dropout must be a number in [0, 1), got ' .. tostring(dropout), 0)
  end

  local layers = { nn.embedding { n_embd = n_embd, seq_len = seq_len, vocab = vocab, dropout = dropout,
                                  padded_vocab = padded_vocab } }
  for _ = 1, n_layer do
    layers[#layers + 1] = nn.transformer_block { n_head = n_head, dropout = dropout, n_layer = n_layer }
  end
  layers[#layers + 1] = nn.layernorm()
  layers[#layers + 1] = nn.lm_head { tied = true }
  return nn.model { name = 'gpt', layers = layers }
end
