// The Control message and its wire: what rank 0 decides and what each rank says of
// its own step reach every rank intact through a SUM of every rank's encoding (the
// gradient all-reduce), and what a float cannot carry exactly is refused.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "engine/core/error.hpp"
#include "engine/train/control.hpp"

BOOST_AUTO_TEST_SUITE(test_control)  // ctest's unit.test_control (tests/CMakeLists.txt)

using namespace tandem;
namespace tt = boost::test_tools;

namespace {

// What a SUM all-reduce gives: every rank's encoding of its own view, added up.
Control through_allreduce(const std::vector<Control>& by_rank) {
  const ControlWire wire(static_cast<int>(by_rank.size()));
  std::vector<float> sum(wire.floats(), 0.0f), part(wire.floats());
  for (size_t r = 0; r < by_rank.size(); ++r) {
    wire.encode(by_rank[r], static_cast<int>(r), part.data());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  return wire.decode(sum.data());
}

Control decisions() {
  Control c;
  c.stop = true;
  c.checkpoint = true;
  Plan p;
  p.local_batch = {1, 0, 40, 87};
  p.sync.mode = SyncMode::grouped;
  p.sync.group = {0, 0, 1, 1};
  p.sync.staleness = 2;
  p.sync.sync_every = 7;
  c.plan = p;
  c.slowdown = SlowdownRequest{2, 0.25, 30};
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rank0_decisions_and_every_rank_flag_arrive_whole) {
  std::vector<Control> by_rank(4);
  by_rank[0] = decisions();
  for (Control& c : by_rank) c.nonfinite.assign(4, false);
  by_rank[1].nonfinite[1] = true;
  by_rank[3].nonfinite[3] = true;
  by_rank[2].stop = true;  // only rank 0's decisions count: rank 2 writes none
  by_rank[2].nonfinite[0] = true;  // nor another rank's flag
  const Control got = through_allreduce(by_rank);
  BOOST_TEST(got.stop);
  BOOST_TEST(!got.pause);
  BOOST_TEST(got.checkpoint);
  BOOST_TEST_REQUIRE(got.plan.has_value());
  BOOST_TEST(got.plan->local_batch == by_rank[0].plan->local_batch, tt::per_element());
  BOOST_TEST(got.plan->sync.str() == by_rank[0].plan->sync.str());
  BOOST_TEST((got.plan->sync == by_rank[0].plan->sync));
  BOOST_TEST_REQUIRE(got.slowdown.has_value());
  BOOST_TEST(got.slowdown->worker == 2);
  BOOST_TEST(got.slowdown->speed == 0.25);
  BOOST_TEST(got.slowdown->iterations == 30);
  BOOST_TEST(got.any_nonfinite());
  BOOST_TEST(got.nonfinite_ranks() == "1, 3");
}

BOOST_AUTO_TEST_CASE(nothing_decided_reads_as_nothing) {
  const Control got = through_allreduce(std::vector<Control>(3));
  BOOST_TEST(!got.stop);
  BOOST_TEST(!got.pause);
  BOOST_TEST(!got.checkpoint);
  BOOST_TEST(!got.plan.has_value());
  BOOST_TEST(!got.slowdown.has_value());
  BOOST_TEST(!got.any_nonfinite());
  BOOST_TEST(got.nonfinite.size() == 3u);
}

BOOST_AUTO_TEST_CASE(bsp_plans_carry_no_groups_and_worker_zero_slows_down) {
  Control c;
  Plan p;
  p.local_batch = {64, 64};
  p.sync.mode = SyncMode::ksync;
  p.sync.k = 1;
  c.plan = p;
  c.slowdown = SlowdownRequest{0, 0.5, 0};  // worker 0 is a worker, not "none"
  const Control got = through_allreduce({c, Control{}});
  BOOST_TEST_REQUIRE(got.plan.has_value());
  BOOST_TEST((got.plan->sync == p.sync));
  BOOST_TEST(got.plan->sync.group.empty());
  BOOST_TEST_REQUIRE(got.slowdown.has_value());
  BOOST_TEST(got.slowdown->worker == 0);
  BOOST_TEST(got.slowdown->iterations == 0);
  BOOST_TEST(got.plan->micro_batches.empty());  // none sent, none read
}

// A plan's micro-batch counts (issue 37) arrive per rank; validate() refuses counts
// out of [1, kMaxMicroBatches], the wrong number of them, and micro-batches outside
// bsp; str() names them.
BOOST_AUTO_TEST_CASE(micro_batch_counts_arrive_and_are_checked) {
  Control c;
  Plan p;
  p.local_batch = {8, 40, 80};
  p.micro_batches = {1, 3, 7};
  c.plan = p;
  const Control got = through_allreduce({c, Control{}, Control{}});
  BOOST_TEST_REQUIRE(got.plan.has_value());
  BOOST_TEST(got.plan->micro_batches == p.micro_batches, tt::per_element());
  BOOST_TEST(got.plan->micro(2, 5) == 7);
  BOOST_TEST(Plan{}.micro(2, 5) == 5);  // none given: the experiment's accumulate
  BOOST_TEST(p.str() == "[8, 40, 80] in micro-batches [1, 3, 7]");
  BOOST_CHECK_NO_THROW(p.validate(3, 128));
  Plan bad = p;
  bad.micro_batches = {1, 0, 7};
  BOOST_CHECK_THROW(bad.validate(3, 128), Error);
  bad.micro_batches = {1, kMaxMicroBatches + 1, 7};
  BOOST_CHECK_THROW(bad.validate(3, 128), Error);
  bad.micro_batches = {1, 3};
  BOOST_CHECK_THROW(bad.validate(3, 128), Error);
  bad = p;
  bad.sync.mode = SyncMode::ksync;
  bad.sync.k = 2;
  BOOST_CHECK_THROW(bad.validate(3, 128), Error);
  bad.micro_batches = {1, 1, 1};  // all ones: no micro-batching, any mode
  BOOST_CHECK_NO_THROW(bad.validate(3, 128));
}

BOOST_AUTO_TEST_CASE(integers_a_float_cannot_carry_are_refused) {
  Control c;
  Plan p;
  p.local_batch = {int64_t{1} << 24, 1};
  c.plan = p;
  const ControlWire wire(2);
  std::vector<float> out(wire.floats());
  BOOST_CHECK_THROW(wire.encode(c, 0, out.data()), Error);
  c.plan->local_batch = {(int64_t{1} << 24) - 1, 1};
  BOOST_CHECK_NO_THROW(wire.encode(c, 0, out.data()));
  BOOST_TEST(wire.decode(out.data()).plan->local_batch[0] == (int64_t{1} << 24) - 1);
}

BOOST_AUTO_TEST_CASE(a_plan_for_another_cluster_size_is_refused) {
  Control c;
  Plan p;
  p.local_batch = {8, 8, 8};
  c.plan = p;
  const ControlWire wire(2);
  std::vector<float> out(wire.floats());
  BOOST_CHECK_THROW(wire.encode(c, 0, out.data()), Error);
}

BOOST_AUTO_TEST_SUITE_END()  // test_control
