// tandem sim's gradient model (engine/sim/gradient_model.hpp) against the engine's
// own two-batch estimator (engine/train/noise_scale.hpp, as the star and goodput
// policies estimate): without noise the estimate is the model's B_noise exactly, for
// uneven local batches too and as it grows with the epochs; with sim.noise the
// smoothed estimate stays near it. Pollux's efficiency and the run's tally
// (batch_tally.hpp): goodput is samples/s at B0, and below it at larger batches.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "engine/sim/batch_tally.hpp"
#include "engine/sim/gradient_model.hpp"
#include "engine/train/config.hpp"
#include "engine/train/noise_scale.hpp"

BOOST_AUTO_TEST_SUITE(test_sim_gradients)  // ctest's unit.test_sim_gradients (tests/CMakeLists.txt)

using namespace tandem;
namespace tt = boost::test_tools;

namespace {

std::vector<WorkerStats> workers(const std::vector<int64_t>& batches) {
  std::vector<WorkerStats> w(batches.size());
  for (size_t r = 0; r < batches.size(); ++r) {
    w[r].rank = static_cast<int>(r);
    w[r].local_batch = batches[r];
  }
  return w;
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_batch_estimate_recovers_the_model_exactly) {
  SimConfig sim;
  sim.noise_scale = 800;
  sim.noise_growth = 0.5;
  const GradientModel model(sim, /*per_epoch=*/10, /*base_batch=*/100);
  BOOST_TEST(model.modelled());
  // Uneven batches, one worker idle (it has no gradient and is left out).
  std::vector<WorkerStats> w = workers({10, 30, 0, 60, 20});
  for (int64_t samples : {int64_t{0}, int64_t{1000}, int64_t{3500}}) {
    const double global = model.fill(7, samples, w);
    const double phi = 800.0 * (1.0 + 0.5 * static_cast<double>(samples) / 1000.0);
    BOOST_TEST(model.noise_scale(samples) == phi, tt::tolerance(1e-12));
    BOOST_TEST(global == 1.0 + phi / 120.0, tt::tolerance(1e-12));
    BOOST_TEST(w[0].grad_sq == 1.0 + phi / 10.0, tt::tolerance(1e-12));
    BOOST_TEST(w[2].grad_sq == 0.0);
    NoiseScale estimate(/*smoothing=*/0.0);  // this observation alone
    estimate.observe(w, global);
    BOOST_TEST(estimate.known());
    BOOST_TEST(estimate.phi() == phi, tt::tolerance(1e-9));
  }
}

BOOST_AUTO_TEST_CASE(noisy_norms_average_to_the_model) {
  SimConfig sim;
  sim.noise_scale = 1000;
  sim.noise = 0.05;
  const GradientModel model(sim, 10, 64 * 32);
  std::vector<WorkerStats> w = workers(std::vector<int64_t>(64, 32));
  NoiseScale estimate;  // the engine's EWMA, 0.9
  double first = 0.0;
  for (int64_t t = 0; t < 200; ++t) {
    estimate.observe(w, model.fill(t, 0, w));
    if (t == 0) first = w[0].grad_sq;
  }
  BOOST_TEST(first != 1.0 + 1000.0 / 32.0);  // the norms do carry noise
  BOOST_TEST(estimate.phi() == 1000.0, tt::tolerance(0.1));
  // The same seed gives the same norms.
  std::vector<WorkerStats> again = workers(std::vector<int64_t>(64, 32));
  model.fill(0, 0, again);
  BOOST_TEST(again[0].grad_sq == first);
}

BOOST_AUTO_TEST_CASE(not_modelled_leaves_the_stats_alone) {
  const SimConfig sim;  // noise_scale 0: the default
  const GradientModel model(sim, 10, 100);
  std::vector<WorkerStats> w = workers({50, 50});
  BOOST_TEST(!model.modelled());
  BOOST_TEST(model.fill(0, 0, w) < 0.0);  // global_grad_sq: not measured
  BOOST_TEST(w[0].grad_sq == 0.0);
  BOOST_TEST(model.efficiency(400, 0) == 1.0);
}

BOOST_AUTO_TEST_CASE(efficiency_and_goodput) {
  SimConfig sim;
  sim.noise_scale = 300;
  const GradientModel model(sim, 10, 100);
  BOOST_TEST(model.efficiency(100, 0) == 1.0);
  BOOST_TEST(model.efficiency(400, 0) == 400.0 / 700.0, tt::tolerance(1e-12));  // (300 + 100) / (300 + 400)
  BOOST_TEST(model.efficiency(50, 0) == 400.0 / 350.0, tt::tolerance(1e-12));
  BatchTally tally;
  tally.add(3, 100, 100, 1.0, 1000.0);
  BOOST_TEST(!tally.changed);
  BOOST_TEST(tally.goodput(2.0) == 150.0, tt::tolerance(1e-12));  // samples/s at B0
  tally.add(1, 400, 100, 400.0 / 700.0, 2000.0);
  BOOST_TEST(tally.changed);
  BOOST_TEST(tally.mean_batch() == 175.0, tt::tolerance(1e-12));
  BOOST_TEST(tally.goodput(4.0) == (300.0 + 400.0 * 400.0 / 700.0) / 4.0, tt::tolerance(1e-12));
  BOOST_TEST(tally.efficiency() == (300.0 + 400.0 * 400.0 / 700.0) / 700.0, tt::tolerance(1e-12));
  BOOST_TEST(tally.ideal_samples_per_s() == 700.0 / (300.0 / 1000.0 + 400.0 / 2000.0), tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_SUITE_END()  // test_sim_gradients
