-- Multi-layer perceptron: flatten, then hidden linear layers each followed by a ReLU
-- (and dropout, when asked), then one linear layer to the classes. With the defaults,
-- 784-256-256-10 on Fashion-MNIST.
-- model_args: hidden = {256, 256} (widths of the hidden layers; one number = one layer),
--             dropout = 0 (probability after each hidden layer; 0 = none).
local nn = require 'tandem.nn'

return function(args)
  local hidden = args.hidden or { 256, 256 }
  local dropout = args.dropout or 0
  if type(hidden) == 'number' then hidden = { hidden } end  -- one hidden layer, as a command-line override gives it
  if type(hidden) ~= 'table' then
    error('model_args.hidden must be a list of layer widths, e.g. {256, 256}; got ' .. tostring(hidden))
  end
  if type(dropout) ~= 'number' or dropout < 0 or dropout >= 1 then
    error('model_args.dropout must be a number in [0, 1); got ' .. tostring(dropout))
  end
  local layers = { nn.flatten() }
  for _, width in ipairs(hidden) do
    layers[#layers + 1] = nn.linear(width)
    layers[#layers + 1] = nn.relu()
    if dropout > 0 then layers[#layers + 1] = nn.dropout(dropout) end
  end
  layers[#layers + 1] = nn.linear(args.classes)
  return nn.model { name = 'mlp', layers = layers }
end
