-- A small ResNet (models/resnet.lua: width 8, one block a stage, batch norm) on
-- Fashion-MNIST.
return {
  model = 'resnet',
  model_args = { width = 8, blocks = 1 },
  data = { name = 'fashion-mnist' },
  global_batch = 128,
  optimizer = 'sgd',
  lr = 0.1,
  momentum = 0.9,
  weight_decay = 5e-4,
  schedule = { kind = 'cosine', warmup_iterations = 50 },
  stop = { epochs = 2, target_accuracy = 0.88 },
  seed = 1,
}
