-- LeNet-5 on Fashion-MNIST, one CPU worker: 88% test accuracy within 3 epochs.
return {
  model = 'lenet',
  data = { name = 'fashion-mnist' },
  global_batch = 64,
  optimizer = 'sgd',
  lr = 0.05,
  momentum = 0.9,
  weight_decay = 5e-4,
  schedule = { kind = 'cosine' },
  stop = { epochs = 3, target_accuracy = 0.88 },
  seed = 1,
}
