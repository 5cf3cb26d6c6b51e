#pragma once
// Fills a worker's input batch for an iteration: the sampler's indices for this
// worker's slice of the global batch, gathered from the data set into a device
// tensor and a label array that are reused every step (sized for the largest batch
// seen, so a changing local batch allocates nothing once warmed up).
#include <cstdint>
#include <vector>

#include "engine/core/tensor.hpp"
#include "engine/data/dataset.hpp"
#include "engine/data/sampler.hpp"

namespace tandem {

class BatchLoader {
public:
  BatchLoader(const Dataset& data, const GlobalSampler& sampler, Device& dev);
  // Positions [offset, offset + count) of iteration t's global batch.
  const Tensor& load(int64_t iteration, int64_t offset, int64_t count);
  const int32_t* labels() const { return labels_.data(); }
  const std::vector<int64_t>& indices() const { return indices_; }

private:
  const Dataset& data_;
  const GlobalSampler& sampler_;
  Device& dev_;
  Tensor x_, batch_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> indices_;
};

}  // namespace tandem
