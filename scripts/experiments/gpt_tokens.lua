-- A GPT on token files, as a nanoGPT or llm.c user brings them: data.train and
-- data.validation name the files (a list, or globs such as 'fineweb_train_*.bin'),
-- data.format tells nanoGPT's raw uint16 from llm.c's headed shards (auto: by the
-- header), data.vocab is the tokenizer's size. The files are memory-mapped: a 17 GB
-- train.bin opens in milliseconds and only the windows drawn are read.
--
-- As given it trains on byte tokens of the fortunes corpus, written by
--   tools/data/text_to_tokens.py /usr/share/games/fortunes --out /tmp/fortunes-tokens
-- For GPT-2 tokens (nanoGPT's data/openwebtext/prepare.py, llm.c's fineweb.py):
--   tandem run scripts/experiments/gpt_tokens.lua data.vocab=50257 \
--     data.train=PATH/train.bin data.validation=PATH/val.bin
-- The model and recipe are gpt.lua's; only the data differs.
local e = dofile('gpt.lua')
e.data = {
  name = 'tokens',
  train = { '/tmp/fortunes-tokens/train.bin' },
  validation = { '/tmp/fortunes-tokens/val.bin' },
  vocab = 256,
  seq_len = 64,
  validation_windows = 512,
}
e.stop = { max_iterations = 2000, target_loss = 2.0 }  -- no epochs: a token file's epoch is every start
return e
