#pragma once
// Batch normalisation (Ioffe and Szegedy, 2015) over the channels of [C, H, W]
// inputs or the features of [F] inputs, with a learned scale (gamma) and shift
// (beta), and running statistics for evaluation (torch's: momentum 0.1, unbiased
// running variance).
//
// Uneven local batches. A worker normalising with its own batch's statistics makes
// the result depend on the split: a worker with 8 samples gets noisy statistics,
// one with 200 good ones, and the update is no longer the one-worker update on the
// whole batch. So by default (sync) the per-channel sums (count, sum x, sum x^2
// forward; sum dy, sum dy*xhat backward) are added up over all workers before
// use, through the step's BatchReducer: every worker normalises with the statistics
// of the whole global batch, and training is the same for any split, to float
// tolerance (tests/integration/test_plan_equivalence.cpp). The price is two small
// all-reduces per layer and step. sync = false keeps each worker's statistics local
// (what data-parallel frameworks do by default); then the split changes the
// mathematics, most for workers with small batches.
#include <vector>

#include "engine/nn/layer.hpp"

namespace tandem {

class BatchNorm final : public Layer {
public:
  BatchNorm(Device& dev, const Shape& in, float eps, float momentum, bool sync);
  std::string describe() const override;
  const Shape& output_shape() const override { return shape_; }
  size_t param_count() const override { return 2 * static_cast<size_t>(channels_); }
  void bind(float* params, float* grads) override;
  void no_decay_ranges(std::vector<std::pair<size_t, size_t>>& out, size_t base) const override {
    out.emplace_back(base, param_count());  // gamma and beta
  }
  void init_params(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const StepContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_dx, const StepContext& ctx) override;

  void save_state(std::vector<double>& out) const override;
  void load_state(const std::vector<double>& in, size_t* at) override;
  bool capturable() const override { return false; }  // its sums come to the host in every pass
  const std::vector<double>& running_mean() const { return running_mean_; }
  const std::vector<double>& running_var() const { return running_var_; }

private:
  Shape shape_;
  int channels_, spatial_;
  float eps_, momentum_;
  bool sync_;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  std::vector<double> running_mean_, running_var_;
  std::vector<double> sums_;           // reduced per-channel sums, then the count
  std::vector<float> host_mean_, host_invstd_, host_grads_;
  Tensor mean_, invstd_;               // on the device, per channel
  double count_ = 0.0;                 // values per channel in the (global) batch
  Tensor xhat_, y_, dx_;
  GradScratch scratch_;  // dgamma and dbeta while accumulating
};

}  // namespace tandem
