-- LeNet-5 for 28x28 inputs (LeCun et al. 1998, with ReLU and max pooling as is usual
-- today): conv 6@5x5 (padding 2) - pool - conv 16@5x5 - pool - 120 - 84 - classes.
local nn = require 'tandem.nn'

return function(args)
  return nn.model { name = 'lenet', layers = {
    nn.conv2d(6, 5, { padding = 2 }), nn.relu(), nn.maxpool2d(2),
    nn.conv2d(16, 5), nn.relu(), nn.maxpool2d(2),
    nn.flatten(),
    nn.linear(120), nn.relu(),
    nn.linear(84), nn.relu(),
    nn.linear(args.classes),
  } }
end
