// SGD semantics (torch.optim.SGD: momentum, dampening 0, weight decay, Nesterov,
// with the 1/B gradient scale folded in) and the learning-rate schedules.
#define BOOST_TEST_MODULE optimizer
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "engine/core/error.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/sgd.hpp"

using namespace tandem;
namespace tt = boost::test_tools;

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
      sgd.step(p, g, cfg.lr, 8);
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
  sgd.step(p, g, 0.5, 4);
  for (float v : p.to_host()) BOOST_TEST(v == -0.5f);
}

BOOST_AUTO_TEST_CASE(unknown_optimizer_is_an_error) {
  OptimizerConfig cfg;
  cfg.name = "adamw";
  BOOST_CHECK_THROW(Sgd(cpu_device(), 2, cfg), Error);
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
