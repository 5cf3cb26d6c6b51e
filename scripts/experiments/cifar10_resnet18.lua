-- The LBB paper's workload: the CIFAR ResNet-18 (models/resnet.lua, depth = 18:
-- 11.17M parameters, batch norm over the whole global batch) on CIFAR-10 with the
-- standard augmentation (random 32x32 crops of the image padded by 4, horizontal
-- flips), global batch 512 split over 4 workers, SGD with momentum 0.9 and weight
-- decay 5e-4, a linear warm-up to lr 0.4 (0.1 per 128 samples) then cosine decay.
--
-- CIFAR-10 does not ship with tandem: download the binary version
-- (cifar-10-binary.tar.gz, https://www.cs.toronto.edu/~kriz/cifar.html), unpack it
-- under data/ (data/cifar-10-batches-bin, the default), or give data.dir=... .
-- On CPU workers each step is heavy (about 1.7 GFLOP a sample): for a short
-- emulated run, lower global_batch and stop.max_iterations.
return {
  model = 'resnet',
  model_args = { depth = 18 },
  data = { name = 'cifar10', dir = 'data/cifar-10-batches-bin', augment = true },
  workers = 4,
  global_batch = 512,
  optimizer = 'sgd',
  lr = 0.4,
  momentum = 0.9,
  weight_decay = 5e-4,
  schedule = { kind = 'cosine', warmup_iterations = 195 },
  stop = { epochs = 30, target_accuracy = 0.93 },
  eval_batch = 500,
  seed = 1,
}
