// Where each iteration's global batch lies when B may change (BatchPositions): with
// B fixed it is the sampler's own mapping; a change of B goes on from the sample
// after the last one drawn; an epoch's tail shorter than B is skipped, so no global
// batch holds a sample twice; a resumed run's positions go on where they stopped.
// And the learning-rate factors of lr_scaling, and the noise-scale estimator.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <set>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/data/batch_positions.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/train/noise_scale.hpp"

BOOST_AUTO_TEST_SUITE(test_batch_positions)  // ctest's unit.test_batch_positions (tests/CMakeLists.txt)

using namespace tandem;

BOOST_AUTO_TEST_CASE(fixed_batches_are_the_samplers_own) {
  const GlobalSampler sampler(1000, 64, 7);
  const BatchPositions positions(1000, 64);
  for (int64_t t = 0; t < 100; ++t) {
    BOOST_TEST(positions.at(t).start == sampler.start_of(t));
    BOOST_TEST(positions.at(t).samples_before == t * 64);
  }
}

BOOST_AUTO_TEST_CASE(a_new_batch_goes_on_after_the_last_sample_and_skips_a_short_tail) {
  BatchPositions p(1000, 100);
  p.resize(3, 300);  // iterations 0..2 drew 0..299; 3 draws 300..599, 4 600..899
  BOOST_TEST(p.at(3).start == 300);
  BOOST_TEST(p.at(4).start == 600);
  BOOST_TEST(p.at(5).start == 1000);  // 900..999 is too short for 300: epoch 1 begins
  BOOST_TEST(p.at(5).samples_before == 3 * 100 + 2 * 300);
  BOOST_TEST(p.at(2).start == 200);  // earlier iterations keep their place
  p.resize(5, 100);                  // the tail now fits
  BOOST_TEST(p.at(5).start == 900);
  p.resize(5, 100);  // again: nothing changes
  BOOST_TEST(p.at(6).start == 1000);
  // Every global batch within one epoch and without repeats.
  BatchPositions q(1000, 64);
  std::set<int64_t> seen;
  for (int64_t t = 0; t < 60; ++t) {
    q.resize(t, 16 + (t * 37) % 200);
    const BatchSpan s = q.at(t);
    BOOST_TEST(s.start % 1000 + s.size <= 1000);
    BOOST_TEST(s.start >= (t ? q.at(t - 1).start + q.at(t - 1).size : 0));
  }
}

BOOST_AUTO_TEST_CASE(a_resumed_run_goes_on_where_it_stopped) {
  BatchPositions run(1000, 64);
  run.resize(10, 200);
  const int64_t cursor = run.cursor_after(12), drawn = run.at(12).samples_before + 200;
  const BatchPositions resumed(1000, 200, 13, cursor, drawn);
  for (int64_t t = 13; t < 30; ++t) {
    BOOST_TEST(resumed.at(t).start == run.at(t).start);
    BOOST_TEST(resumed.at(t).samples_before == run.at(t).samples_before);
  }
  BOOST_CHECK_THROW(resumed.at(12), Error);  // before the resumed run's first iteration
}

BOOST_AUTO_TEST_CASE(sizes_outside_the_data_set_are_refused) {
  BOOST_CHECK_THROW(BatchPositions(100, 0), Error);
  BOOST_CHECK_THROW(BatchPositions(100, 101), Error);
  BatchPositions p(100, 10);
  BOOST_CHECK_THROW(p.resize(1, 101), Error);
  BOOST_CHECK_THROW(p.at(-1), Error);
}

BOOST_AUTO_TEST_CASE(the_learning_rate_follows_the_rule_and_is_lr_at_b0) {
  for (const char* rule : {"linear", "sqrt", "adascale"}) BOOST_TEST(lr_batch_scale(rule, 64, 64, 500.0) == 1.0);
  BOOST_TEST(lr_batch_scale("linear", 256, 64, 0.0) == 4.0);
  BOOST_TEST(lr_batch_scale("sqrt", 256, 64, 0.0) == 2.0);
  BOOST_TEST(lr_batch_scale("adascale", 256, 64, 0.0) == 1.0);  // no estimate yet
  // phi = 64: r = (1 + 1) / (64 / 256 + 1) = 1.6, between 1 and B / B0.
  BOOST_TEST(std::fabs(lr_batch_scale("adascale", 256, 64, 64.0) - 1.6) < 1e-12);
  BOOST_TEST(lr_batch_scale("adascale", 1 << 20, 64, 1e12) > 16000.0);  // noise dominates: nearly linear
  BOOST_CHECK_THROW(lr_batch_scale("cubic", 128, 64, 0.0), Error);
}

BOOST_AUTO_TEST_CASE(the_noise_scale_is_recovered_from_expected_norms) {
  // |G|^2 = 2, tr(Sigma) = 600: phi = 300. A worker's mean gradient over b samples
  // has E|g|^2 = |G|^2 + tr(Sigma) / b; the sum over B has |G|^2 + tr(Sigma) / B.
  const double g2 = 2.0, trace = 600.0;
  std::vector<WorkerStats> w(4);
  const int64_t b[] = {10, 30, 60, 100};
  for (size_t r = 0; r < 4; ++r) {
    w[r].local_batch = b[r];
    w[r].grad_sq = g2 + trace / static_cast<double>(b[r]);
  }
  NoiseScale noise;
  BOOST_TEST(!noise.known());
  noise.observe(w, g2 + trace / 200.0);
  BOOST_TEST(noise.known());
  // The batch-weighted mean of the workers' norms is |G|^2 + tr(Sigma) / (B / n)
  // for uneven batches too: exact.
  BOOST_TEST(std::fabs(noise.phi() - 300.0) < 1e-9);
  NoiseScale equal;
  for (auto& s : w) {
    s.local_batch = 50;
    s.grad_sq = g2 + trace / 50.0;
  }
  equal.observe(w, g2 + trace / 200.0);
  BOOST_TEST(std::fabs(equal.phi() - 300.0) < 1e-9);
  NoiseScale restored;
  restored.restore(equal.state());
  BOOST_TEST(restored.phi() == equal.phi());
  w[1].grad_sq = 0.0;  // not measured: nothing learnt
  NoiseScale unmeasured;
  unmeasured.observe(w, 1.0);
  BOOST_TEST(!unmeasured.known());
}

BOOST_AUTO_TEST_SUITE_END()  // test_batch_positions
