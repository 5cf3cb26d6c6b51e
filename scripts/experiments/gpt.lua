-- A small GPT (models/gpt.lua) learning English from the fortunes corpus (Debian's
-- `fortunes` package) one byte at a time, nanoGPT's recipe scaled to one CPU core:
-- AdamW with decoupled weight decay on matrices and embeddings only, gradient
-- clipping at norm 1, linear warm-up then cosine decay. Validation is the corpus's
-- last tenth; the loss is nats per byte (bits per byte = loss / ln 2). A unigram
-- (byte-frequency) model scores about 3.4 nats per byte on the same text: the run
-- stops once the validation loss is clearly below it.
return {
  model = 'gpt',
  model_args = { n_layer = 2, n_head = 4, n_embd = 128, dropout = 0 },
  data = { name = 'text', seq_len = 64 },
  global_batch = 32,
  optimizer = 'adamw',
  lr = 2e-3,
  beta1 = 0.9,
  beta2 = 0.99,
  weight_decay = 0.1,
  clip_grad_norm = 1.0,
  schedule = { kind = 'cosine', warmup_iterations = 100, min_lr = 2e-4 },
  stop = { epochs = 1, max_iterations = 2000, target_loss = 2.0 },
  eval_every = 200,
  eval_batch = 64,
  log_every = 50,
  seed = 1,
}
