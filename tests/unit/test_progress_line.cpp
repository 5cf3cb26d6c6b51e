// The progress line's pieces (engine/train/record/progress_line.hpp): the clock text,
// the share done against the stop that binds first, and lines that fit 120 columns
// with the log's prefix for any number of workers.
#include <boost/test/unit_test.hpp>

#include "engine/train/record/progress_line.hpp"

BOOST_AUTO_TEST_SUITE(test_progress_line)  // ctest's unit.test_progress_line (tests/CMakeLists.txt)

using namespace tandem;

BOOST_AUTO_TEST_CASE(clock_text_is_m_ss_or_h_mm_ss) {
  BOOST_TEST(clock_text(0) == "0:00");
  BOOST_TEST(clock_text(83.4) == "1:23");
  BOOST_TEST(clock_text(3599.4) == "59:59");
  BOOST_TEST(clock_text(3725) == "1:02:05");
  BOOST_TEST(clock_text(-5) == "0:00");
}

BOOST_AUTO_TEST_CASE(the_stop_that_binds_first_counts) {
  StopConfig stop;
  // Iterations only: 420 of 1260 at 0.2 s each.
  StopEstimate e = estimate_stop(stop, 420, 1260, 60.0, 0.2);
  BOOST_TEST(e.fraction == 1.0 / 3.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(e.remaining_s == 840 * 0.2, boost::test_tools::tolerance(1e-9));
  // max_seconds binds sooner: 60 of 100 s of training done.
  stop.max_seconds = 100.0;
  e = estimate_stop(stop, 420, 1260, 60.0, 0.2);
  BOOST_TEST(e.fraction == 0.6, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(e.remaining_s == 40.0, boost::test_tools::tolerance(1e-9));
  // ... and not when the iterations end first.
  stop.max_seconds = 1000.0;
  e = estimate_stop(stop, 420, 1260, 60.0, 0.2);
  BOOST_TEST(e.fraction == 1.0 / 3.0, boost::test_tools::tolerance(1e-12));
  // No cost per iteration yet: no estimate.
  BOOST_TEST(estimate_stop(StopConfig{}, 1, 10, 0.1, 0.0).remaining_s < 0);
}

BOOST_AUTO_TEST_CASE(stop_text_names_the_bounds_and_targets) {
  StopConfig stop;
  stop.epochs = 2;
  stop.target_accuracy = 0.9;
  BOOST_TEST(stop_text(stop, 1874, 937) == "stops after 1874 iterations (2 epochs) or at test accuracy 0.9");
  stop.max_iterations = 100;
  BOOST_TEST(stop_text(stop, 100, 937) == "stops after 100 iterations (stop.max_iterations) or at test accuracy 0.9");
}

BOOST_AUTO_TEST_CASE(lines_fit_120_columns) {
  ProgressView v;
  v.elapsed_s = 83;
  v.estimate = {0.33, 167};
  v.epochs = 13.17;
  v.done = 12345;
  v.total = 93700;
  v.loss = 0.4312;
  v.train_accuracy = 0.87;
  v.lr = 3.4256e-05;
  v.samples_per_s = 187345;
  const std::string line = progress_line(v);
  BOOST_TEST(line ==
             "[1:23/~4:10  33%] epoch 13.17 iter 12345/93700 loss 0.4312 acc 0.870 187345 samples/s lr 3.4e-05");
  BOOST_TEST(line.size() <= kMessageColumns);
  v.loss.reset();
  v.train_accuracy.reset();
  v.lr.reset();  // tandem sim
  BOOST_TEST(progress_line(v).find("loss") == std::string::npos);
  BOOST_TEST(progress_line(v).find("lr") == std::string::npos);
  for (int workers : {2, 4, 8, 16, 64, 512}) {
    BalanceView b;
    for (int r = 0; r < workers; ++r) {
      b.local_batch.push_back(1000 + r);
      b.compute_ms.push_back(100.0 + r);
    }
    b.policy = "a_policy_with_a_long_name";
    b.plans = 123;
    const std::string balance = balance_line(b);
    BOOST_TEST(balance.size() <= kMessageColumns, workers << " workers: " << balance);
    BOOST_TEST(balance.find(workers > 64 ? "batches: 1000 " : "batches: 1000 1001") != std::string::npos, balance);
    BOOST_TEST(balance.find(std::to_string(1000 + workers - 1)) != std::string::npos, balance);
    BOOST_TEST(balance.find("(r0)") != std::string::npos);
    BOOST_TEST(balance.find("(r" + std::to_string(workers - 1) + ")") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()  // test_progress_line
