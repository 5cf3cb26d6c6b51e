-- What the suite's studies share: the MLP 784-256-256-10 on Fashion-MNIST at a global
-- batch of 512, SGD with momentum 0.9, weight decay 5e-4 and a cosine schedule, no
-- console, progress every 50 iterations. training{...} adds a study's own settings
-- (workers, stop, emulation, ...) over these; a study may override any of them.
local M = {}

function M.training(study)
  local e = {
    model = 'mlp',
    global_batch = 512,
    lr = 0.1,
    momentum = 0.9,
    weight_decay = 5e-4,
    schedule = { kind = 'cosine' },
    log_every = 50,
    console = false,
  }
  for k, v in pairs(study) do e[k] = v end
  return e
end

return M
