-- Quickstart: the MLP 784-256-256-10 on Fashion-MNIST, one CPU worker.
-- Reaches 85% test accuracy within 2 epochs (make quickstart).
return {
  model = 'mlp',
  model_args = { hidden = { 256, 256 } },
  data = { name = 'fashion-mnist' },
  global_batch = 64,
  optimizer = 'sgd',
  lr = 0.05,
  momentum = 0.9,
  weight_decay = 5e-4,
  schedule = { kind = 'cosine' },
  stop = { epochs = 2, target_accuracy = 0.85 },
  eval_every = 0,
  seed = 1,
}
