-- A small ResNet for 28x28 images (He et al., 2016; the CIFAR variant, scaled
-- down): a 3x3 stem, three stages of residual blocks at widths w, 2w and 4w (the
-- second and third halve the resolution, 28 -> 14 -> 7, with a strided 1x1
-- projection on the shortcut), global average pooling and a linear head. Every
-- convolution is followed by batch norm.
-- model_args: width (default 16), blocks per stage (1), batchnorm (true: statistics
-- over the whole global batch, the default; 'local': each worker's own).
-- depth = 18 or 34: the CIFAR ResNet-18/34 instead (He et al.'s ImageNet stages on
-- 32x32 images, as the LBB paper and most CIFAR code train it: a 3x3 stem of 64
-- without max pooling, four stages of basic blocks at 64, 128, 256 and 512 channels,
-- [2, 2, 2, 2] or [3, 4, 6, 3] of them, the last three stages halving the
-- resolution, 32 -> 16 -> 8 -> 4; 11.17M parameters for 18 at 10 classes); width
-- and blocks are then set by the depth.
local nn = require 'tandem.nn'

local DEPTHS = { [18] = { 2, 2, 2, 2 }, [34] = { 3, 4, 6, 3 } }

return function(args)
  local depth = args.depth
  if depth ~= nil and not DEPTHS[depth] then
    error('resnet: model_args.depth must be 18 or 34 (the CIFAR ResNet-18/34), got ' .. tostring(depth), 2)
  end
  if depth ~= nil and (args.width ~= nil or args.blocks ~= nil) then
    error('resnet: model_args.width and blocks are set by depth = ' .. tostring(depth) .. '; leave them out', 2)
  end
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

  local widths, counts = { width, 2 * width, 4 * width }, { blocks, blocks, blocks }
  if depth then
    width, widths, counts = 64, { 64, 128, 256, 512 }, DEPTHS[depth]
  end
  local layers = { nn.conv2d(width, 3, { padding = 1, bias = false }), bn(), nn.relu() }
  local channels = width
  for stage, out in ipairs(widths) do
    for b = 1, counts[stage] do
      layers[#layers + 1] = block(channels, out, (b == 1 and stage > 1) and 2 or 1)
      channels = out
    end
  end
  layers[#layers + 1] = nn.avgpool()
  layers[#layers + 1] = nn.linear(args.classes)
  return nn.model { name = depth and ('resnet' .. depth) or 'resnet', layers = layers }
end
