-- A small ResNet for 28x28 images (He et al., 2016; the CIFAR variant, scaled
-- down): a 3x3 stem, three stages of residual blocks at widths w, 2w and 4w (the
-- second and third halve the resolution, 28 -> 14 -> 7, with a strided 1x1
-- projection on the shortcut), global average pooling and a linear head. Every
-- convolution is followed by batch norm.
-- model_args: width (default 16), blocks per stage (1), batchnorm (true: statistics
-- over the whole global batch, the default; 'local': each worker's own).
local nn = require 'tandem.nn'

return function(args)
  local width, blocks = args.width or 16, args.blocks or 1
  if args.batchnorm ~= nil and args.batchnorm ~= true and args.batchnorm ~= 'sync' and args.batchnorm ~= 'local' then
    error("resnet: model_args.batchnorm must be true, 'sync' or 'local', got " .. tostring(args.batchnorm), 2)
  end
  local sync = args.batchnorm ~= 'local'
  local function bn() return nn.batchnorm { sync = sync } end

  local function block(channels_in, channels, stride)
    local body = {
      nn.conv2d(channels, 3, { stride = stride, padding = 1, bias = false }), bn(), nn.relu(),
      nn.conv2d(channels, 3, { padding = 1, bias = false }), bn(),
    }
    local shortcut
    if stride ~= 1 or channels_in ~= channels then
      shortcut = { nn.conv2d(channels, 1, { stride = stride, bias = false }), bn() }
    end
    return nn.residual { body = body, shortcut = shortcut }
  end

  local layers = { nn.conv2d(width, 3, { padding = 1, bias = false }), bn(), nn.relu() }
  local channels = width
  for stage, out in ipairs({ width, 2 * width, 4 * width }) do
    for b = 1, blocks do
      layers[#layers + 1] = block(channels, out, (b == 1 and stage > 1) and 2 or 1)
      channels = out
    end
  end
  layers[#layers + 1] = nn.avgpool()
  layers[#layers + 1] = nn.linear(args.classes)
  return nn.model { name = 'resnet', layers = layers }
end
