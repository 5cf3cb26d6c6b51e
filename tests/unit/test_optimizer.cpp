// SGD semantics (torch.optim.SGD: momentum, dampening 0, weight decay, Nesterov,
// with the 1/B gradient scale folded in), AdamW's (torch.optim.AdamW over the
// model's parameter groups), gradient clipping, and the learning-rate schedules.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/train/step.hpp"
#include "tests/unit/tiny_mlp.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_optimizer)  // ctest's unit.test_optimizer (tests/CMakeLists.txt)

using namespace tandem;
namespace tt = boost::test_tools;

using testing::tiny_mlp;

namespace {
// The update written out for one scalar, as torch.optim.SGD defines it.
struct ScalarSgd {
  double p, v = 0.0;
  bool first = true;
  void step(double grad_sum, double samples, double lr, double mu, double wd, bool nesterov) {
    double g = grad_sum / samples + wd * p;
    v = first ? g : mu * v + g;
    first = false;
    p -= lr * (nesterov ? g + mu * v : v);
  }
};
}  // namespace

BOOST_AUTO_TEST_CASE(sgd_matches_torch_semantics) {
  for (bool nesterov : {false, true}) {
    OptimizerConfig cfg;
    cfg.lr = 0.1;
    cfg.momentum = 0.9;
    cfg.weight_decay = 0.01;
    cfg.nesterov = nesterov;
    Tensor p(cpu_device(), {3}), g(cpu_device(), {3});
    const float p0[3] = {1.0f, -2.0f, 0.5f};
    p.from_host(p0, 3);
    ScalarSgd ref[3] = {{1.0}, {-2.0}, {0.5}};
    Sgd sgd(cpu_device(), 3, cfg);
    for (int step = 0; step < 5; ++step) {
      const float gs[3] = {0.3f * step, -1.0f, 4.0f - step};
      g.from_host(gs, 3);
      sgd.step(p, g, cfg.lr, 1.0 / 8);
      for (int i = 0; i < 3; ++i) ref[i].step(gs[i], 8, cfg.lr, cfg.momentum, cfg.weight_decay, nesterov);
    }
    auto out = p.to_host();
    for (int i = 0; i < 3; ++i) BOOST_TEST(out[i] == ref[i].p, tt::tolerance(1e-5));
  }
}

BOOST_AUTO_TEST_CASE(sgd_without_momentum_needs_no_velocity) {
  OptimizerConfig cfg;
  cfg.momentum = 0.0;
  Sgd sgd(cpu_device(), 2, cfg);
  BOOST_TEST(!sgd.velocity().defined());
  Tensor p(cpu_device(), {2}), g(cpu_device(), {2});
  g.fill(4.0f);
  sgd.step(p, g, 0.5, 1.0 / 4);
  for (float v : p.to_host()) BOOST_TEST(v == -0.5f);
}

BOOST_AUTO_TEST_CASE(unknown_optimizer_is_an_error) {
  OptimizerConfig cfg;
  cfg.name = "adamw";
  BOOST_CHECK_THROW(Sgd(cpu_device(), 2, cfg), Error);
  cfg.name = "adam";
  Model model(cpu_device(), tiny_mlp(), 1);
  BOOST_CHECK_THROW(make_optimizer(cpu_device(), model, cfg), Error);
}

namespace {
// torch.optim.AdamW's update written out for one scalar, in double.
struct ScalarAdamW {
  double p, m = 0.0, v = 0.0;
  int t = 0;
  void step(double g, double lr, double b1, double b2, double eps, double wd) {
    ++t;
    p *= 1.0 - lr * wd;
    m = b1 * m + (1.0 - b1) * g;
    v = b2 * v + (1.0 - b2) * g * g;
    const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
    p -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
  }
};
}  // namespace

// AdamW on a real model's parameter groups: the weights decay, the biases do not,
// and every parameter follows torch's formulas (bias correction included).
BOOST_AUTO_TEST_CASE(adamw_matches_torch_semantics_with_parameter_groups) {
  Model model(cpu_device(), tiny_mlp(), 3);
  OptimizerConfig cfg;
  cfg.name = "adamw";
  cfg.beta1 = 0.8;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-6;
  cfg.weight_decay = 0.3;
  const auto opt = make_optimizer(cpu_device(), model, cfg);
  BOOST_TEST(opt->state().size() == 2u);
  const size_t n = model.param_count();
  std::vector<bool> decays(n, false);
  size_t covered = 0;
  for (const ParamRange& r : model.param_groups()) {
    for (size_t i = r.offset; i < r.offset + r.count; ++i) decays[i] = r.decay;
    covered += r.count;
  }
  BOOST_TEST(covered == n);
  BOOST_TEST(std::count(decays.begin(), decays.end(), false) > 0);  // the biases
  BOOST_TEST(std::count(decays.begin(), decays.end(), true) > 0);   // the weights
  std::vector<ScalarAdamW> ref;
  for (float p : model.params().to_host()) ref.push_back({p});
  Tensor g(cpu_device(), {static_cast<int64_t>(n)});
  for (int step = 0; step < 6; ++step) {
    std::vector<float> gs(n);
    for (size_t i = 0; i < n; ++i) gs[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + step) * 3.0);
    g.from_host(gs.data(), n);
    const double lr = 0.01 * (step + 1), scale = 1.0 / 6.0;
    opt->step(model.params(), g, lr, scale);
    for (size_t i = 0; i < n; ++i)
      ref[i].step(gs[i] * scale, lr, cfg.beta1, cfg.beta2, cfg.eps, decays[i] ? cfg.weight_decay : 0.0);
  }
  BOOST_TEST(opt->steps() == 6);
  const auto out = model.params().to_host();
  for (size_t i = 0; i < n; ++i) BOOST_TEST(out[i] == ref[i].p, tt::tolerance(2e-5));
}

// clip_grad_norm_: the mean gradient's norm past max_norm is scaled to it; below,
// nothing changes. The scale folds in 1/predictions and the clipping factor.
BOOST_AUTO_TEST_CASE(gradient_scale_clips_the_mean_gradient_norm) {
  double norm = 0.0;
  // A SUM gradient of squared norm 400 over 4 predictions: mean norm 20 / 4 = 5.
  BOOST_TEST(gradient_scale(400.0, 4.0, 0.0, &norm) == 0.25, tt::tolerance(1e-12));
  BOOST_TEST(norm == 5.0, tt::tolerance(1e-12));
  BOOST_TEST(gradient_scale(400.0, 4.0, 10.0) == 0.25, tt::tolerance(1e-12));  // below: untouched
  BOOST_TEST(gradient_scale(400.0, 4.0, 1.0) == 0.25 * 1.0 / (5.0 + 1e-6), tt::tolerance(1e-12));
  // The same mean gradient from a sum over twice the samples clips the same.
  BOOST_TEST(gradient_scale(1600.0, 8.0, 1.0) * 40.0 == gradient_scale(400.0, 4.0, 1.0) * 20.0,
             tt::tolerance(1e-12));
  // A non-finite norm is not clipped (the step is skipped elsewhere).
  BOOST_TEST(gradient_scale(std::numeric_limits<double>::infinity(), 4.0, 1.0) == 0.25, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(step_schedule) {
  ScheduleConfig cfg;
  cfg.kind = "step";
  cfg.step_epochs = 2;
  cfg.gamma = 0.5;
  LrSchedule s(cfg, 0.2, 10, 100);
  BOOST_TEST(s.at(0) == 0.2, tt::tolerance(1e-12));
  BOOST_TEST(s.at(19) == 0.2, tt::tolerance(1e-12));
  BOOST_TEST(s.at(20) == 0.1, tt::tolerance(1e-12));
  BOOST_TEST(s.at(45) == 0.05, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(cosine_schedule_with_warmup) {
  ScheduleConfig cfg;
  cfg.kind = "cosine";
  cfg.warmup_iterations = 10;
  cfg.min_lr = 0.01;
  LrSchedule s(cfg, 1.0, 10, 110);
  BOOST_TEST(s.at(0) == 0.1, tt::tolerance(1e-12));
  BOOST_TEST(s.at(9) == 1.0, tt::tolerance(1e-12));
  BOOST_TEST(s.at(10) == 1.0, tt::tolerance(1e-12));
  BOOST_TEST(s.at(60) == 0.505, tt::tolerance(1e-9));
  BOOST_TEST(s.at(110) == 0.01, tt::tolerance(1e-9));
  for (int t = 11; t < 110; ++t) BOOST_TEST(s.at(t) <= s.at(t - 1));
}

BOOST_AUTO_TEST_CASE(constant_schedule_and_unknown_kind) {
  ScheduleConfig cfg;
  LrSchedule s(cfg, 0.3, 10, 100);
  BOOST_TEST(s.at(57) == 0.3);
  cfg.kind = "linear";
  BOOST_CHECK_THROW(LrSchedule(cfg, 0.3, 10, 100), Error);
}

// Gradient accumulation: the local batch computed in K micro-batches gives the
// gradient and loss of one pass, whatever K (dropout masks follow the samples'
// positions), including K larger than the batch and an empty batch.
BOOST_AUTO_TEST_CASE(accumulation_gives_the_gradient_of_one_pass) {
  for (int64_t n : {int64_t{0}, int64_t{2}, int64_t{11}}) {
    std::vector<float> x(static_cast<size_t>(n) * 7);
    std::vector<int32_t> labels(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::cos(1.3 * static_cast<double>(i)));
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 3);
    std::vector<float> reference;
    double reference_loss = 0.0;
    for (int64_t k : {int64_t{1}, int64_t{3}, int64_t{16}}) {
      Model model(cpu_device(), tiny_mlp(0.3), 5);
      OptimizerConfig cfg;
      const auto opt = make_optimizer(cpu_device(), model, cfg);
      TrainStep step(model, *opt, k);
      Tensor batch(cpu_device(), {n, 7});
      batch.from_host(x.data(), x.size());
      StepContext ctx;
      ctx.seed = 99;
      ctx.first_sample = 5;
      const LossResult r = step.compute(batch, labels.data(), ctx);
      const std::vector<float> grads = model.grads().to_host();
      if (k == 1) {
        reference = grads;
        reference_loss = r.loss_sum;
        continue;
      }
      BOOST_TEST_CONTEXT("batch " << n << ", accumulate " << k) {
        BOOST_TEST(r.loss_sum == reference_loss, tt::tolerance(1e-5));
        BOOST_TEST(testing::scaled_difference(grads, reference, 1e-6) < 1e-5);
      }
    }
  }
}

// The update divides by the predictions (samples x positions for a sequence model)
// and clips on the summed gradient: one worker's sum over 8 samples and the same sum
// handed over as if from several workers give the same step.
BOOST_AUTO_TEST_CASE(update_scales_by_the_predictions_and_clips) {
  Model model(cpu_device(), tiny_mlp(), 2);
  OptimizerConfig cfg;
  cfg.momentum = 0.0;
  cfg.clip_grad_norm = 1e-3;  // far below the gradient's norm: clipping acts
  const auto opt = make_optimizer(cpu_device(), model, cfg);
  TrainStep step(model, *opt);
  const std::vector<float> before = model.params().to_host();
  std::vector<float> g(model.param_count());
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 5) - 2.0f;
  model.grads().from_host(g.data(), g.size());
  step.update(8, 1.0);
  const std::vector<float> after = model.params().to_host();
  double moved = 0.0, norm = 0.0;
  for (size_t i = 0; i < g.size(); ++i) {
    moved += (before[i] - after[i]) * (before[i] - after[i]);
    norm += static_cast<double>(g[i]) * g[i];
  }
  // An SGD step of lr 1 moves the parameters by the clipped mean gradient: its norm.
  BOOST_TEST(std::sqrt(moved) == cfg.clip_grad_norm, tt::tolerance(1e-3));
  BOOST_TEST(step.last_grad_norm() == std::sqrt(norm) / 8.0, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_SUITE_END()  // test_optimizer
