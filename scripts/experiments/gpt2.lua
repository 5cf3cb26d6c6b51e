-- GPT-2 (124M: models/gpt.lua's preset 'gpt2') on GPT-2 tokens, nanoGPT's
-- train_gpt2 recipe scaled to a small batch: AdamW at 6e-4 (betas 0.9/0.95, weight
-- decay 0.1 on matrices and embeddings), gradient clipping at 1, warm-up then cosine
-- decay to 6e-5, context 1024, no dropout.
--
-- The data is nanoGPT's data/openwebtext (prepare.py writes train.bin and val.bin)
-- or llm.c's fineweb shards; point data.train and data.validation at them:
--   tandem run scripts/experiments/gpt2.lua data.train=PATH/train.bin data.validation=PATH/val.bin
--   tandem run scripts/experiments/gpt2.lua 'data.train=fineweb10B/fineweb_train_*.bin' \
--     data.validation=fineweb10B/fineweb_val_000000.bin
-- Fine-tuning from OpenAI's weights: init_from=PATH/model.safetensors (Hugging Face's
-- gpt2). Larger sizes: 'model_args={preset = "gpt2-medium"}' (-large, -xl).
return {
  model = 'gpt',
  model_args = { preset = 'gpt2', dropout = 0 },
  data = {
    name = 'tokens',
    train = { 'data/openwebtext/train.bin' },
    validation = { 'data/openwebtext/val.bin' },
    vocab = 50257,
    seq_len = 1024,
    validation_windows = 64,
  },
  global_batch = 4,  -- 12.9 GiB of activations at 1024 tokens on a CPU worker (the memory check)
  optimizer = 'adamw',
  lr = 6e-4,
  beta1 = 0.9,
  beta2 = 0.95,
  weight_decay = 0.1,
  clip_grad_norm = 1.0,
  schedule = { kind = 'cosine', warmup_iterations = 700, min_lr = 6e-5 },
  stop = { max_iterations = 60000 },
  eval_every = 1000,
  eval_batch = 8,
  log_every = 10,
  seed = 1,
}
