-- LeNet-5 for 28x28 inputs (padding 2 on the first convolution, as for MNIST).
-- model_args.batchnorm: nil/false (none, the classic network), true or 'sync'
-- (batch norm after every convolution and hidden linear layer, with statistics over
-- the whole global batch), or 'local' (each worker's own statistics; see
-- engine/nn/batchnorm.hpp for what that changes when local batches are uneven).
local nn = require 'tandem.nn'

return function(args)
  local bn = args.batchnorm
  if bn ~= nil and bn ~= false and bn ~= true and bn ~= 'sync' and bn ~= 'local' then
    error("lenet: model_args.batchnorm must be true, false, 'sync' or 'local', got " .. tostring(bn), 2)
  end
  local function norm()
    if not bn then return nil end
    return nn.batchnorm { sync = bn ~= 'local' }
  end
  local layers = {}
  local function add(...)
    for i = 1, select('#', ...) do
      local l = select(i, ...)
      if l then layers[#layers + 1] = l end
    end
  end
  add(nn.conv2d(6, 5, { padding = 2, bias = not bn }), norm(), nn.relu(), nn.maxpool2d(2))
  add(nn.conv2d(16, 5, { bias = not bn }), norm(), nn.relu(), nn.maxpool2d(2))
  add(nn.flatten())
  add(nn.linear(120, { bias = not bn }), norm(), nn.relu())
  add(nn.linear(84, { bias = not bn }), norm(), nn.relu())
  add(nn.linear(args.classes))
  return nn.model { name = bn and 'lenet-bn' or 'lenet', layers = layers }
end
