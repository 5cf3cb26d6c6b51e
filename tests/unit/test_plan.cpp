// The plan a run starts from (Plan::initial, SyncPlan::initial), which `tandem run`
// and `tandem sim` share: equal, fixed and proportional splits, the refinement of
// the proportional one, the experiment's sync settings, and the errors.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/train/config.hpp"
#include "engine/train/plan.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_plan)  // ctest's unit.test_plan (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
namespace tt = boost::test_tools;

namespace {

ExperimentConfig experiment(const std::string& kind, int64_t global_batch) {
  ExperimentConfig cfg;
  cfg.plan.kind = kind;
  cfg.global_batch = global_batch;
  return cfg;
}

// Worker r computes b samples in 10 + b / speed[r] ms: a fixed cost, so its
// samples/s grows with its batch. Counts the calls and keeps the first one's batches.
struct FixedCostWorkers {
  std::vector<double> speed;
  int calls = 0;
  std::vector<int64_t> first_asked;
  Plan::Throughput throughput() {
    return [this](const std::vector<int64_t>& local_batch) {
      if (calls++ == 0) first_asked = local_batch;
      std::vector<double> samples_per_s;
      for (size_t r = 0; r < local_batch.size(); ++r) {
        const double b = static_cast<double>(local_batch[r]);
        samples_per_s.push_back(b / ((10.0 + b / speed[r]) / 1000.0));
      }
      return samples_per_s;
    };
  }
};

Plan::Throughput never_asked() {
  return [](const std::vector<int64_t>&) -> std::vector<double> {
    BOOST_FAIL("the throughput is asked only for a proportional plan");
    return {};
  };
}

}  // namespace

BOOST_AUTO_TEST_CASE(equal_split_gives_the_remainder_to_the_first_ranks) {
  const Plan p = Plan::initial(experiment("equal", 10), 3, never_asked());
  BOOST_TEST(p.local_batch == (std::vector<int64_t>{4, 3, 3}), tt::per_element());
  BOOST_TEST((p.sync.mode == SyncMode::bsp));
}

BOOST_AUTO_TEST_CASE(fixed_split_is_the_experiments_batches_and_is_validated) {
  ExperimentConfig cfg = experiment("fixed", 10);
  cfg.plan.batches = {5, 0, 5};
  BOOST_TEST(Plan::initial(cfg, 3, never_asked()).local_batch == cfg.plan.batches, tt::per_element());
  cfg.plan.batches = {5, 3, 3};
  const std::string msg = error_of([&] { Plan::initial(cfg, 3, never_asked()); });
  CHECK_CONTAINS(msg, "make the local batches add up to global_batch");
  CHECK_CONTAINS(msg, "[5, 3, 3]");
}

// With a fixed cost per step the balanced split of 400 samples over speeds 4 and 1
// is 320 / 80 (both take 10 + 80 ms); one proportional round from the equal split
// stops at 311 / 89, the refinement reaches it.
BOOST_AUTO_TEST_CASE(proportional_split_is_refined_from_the_equal_one_until_balanced) {
  ExperimentConfig cfg = experiment("proportional", 400);
  cfg.emulation.enabled = true;
  FixedCostWorkers workers{{4.0, 1.0}, 0, {}};
  const Plan p = Plan::initial(cfg, 2, workers.throughput());
  BOOST_TEST(p.local_batch == (std::vector<int64_t>{320, 80}), tt::per_element());
  BOOST_TEST(workers.calls == 8);
  BOOST_TEST(workers.first_asked == (std::vector<int64_t>{200, 200}), tt::per_element());
  FixedCostWorkers once{{4.0, 1.0}, 0, {}};
  BOOST_TEST(Plan::proportional(once.throughput()({200, 200}), 400).local_batch == (std::vector<int64_t>{311, 89}),
             tt::per_element());
}

BOOST_AUTO_TEST_CASE(proportional_split_without_emulation_is_an_error_naming_the_fix) {
  const std::string msg = error_of([] { Plan::initial(experiment("proportional", 64), 2, never_asked()); });
  CHECK_CONTAINS(msg, "no emulation is configured");
  CHECK_CONTAINS(msg, "set emulation = {...} or use plan = {kind = 'equal'}");
}

BOOST_AUTO_TEST_CASE(sync_settings_become_the_plans_with_groups_counted_from_zero) {
  ExperimentConfig cfg = experiment("equal", 12);
  cfg.plan.sync.mode = "grouped";
  cfg.plan.sync.groups = {1, 1, 2};
  cfg.plan.sync.staleness = 2;
  cfg.plan.sync.sync_every = 5;
  const Plan p = Plan::initial(cfg, 3, never_asked());
  BOOST_TEST((p.sync.mode == SyncMode::grouped));
  BOOST_TEST(p.sync.group == (std::vector<int>{0, 0, 1}), tt::per_element());
  BOOST_TEST(p.sync.staleness == 2);
  BOOST_TEST(p.sync.sync_every == 5);
  // No groups given: one group of every worker.
  cfg.plan.sync.groups.clear();
  BOOST_TEST(SyncPlan::initial(cfg, 3).group == (std::vector<int>{0, 0, 0}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(ksync_waits_for_every_worker_unless_told_and_one_worker_is_bsp) {
  ExperimentConfig cfg = experiment("equal", 12);
  cfg.plan.sync.mode = "ksync";
  BOOST_TEST(SyncPlan::initial(cfg, 4).k == 4);
  cfg.plan.sync.k = 3;
  BOOST_TEST(SyncPlan::initial(cfg, 4).k == 3);
  BOOST_TEST((SyncPlan::initial(cfg, 1) == SyncPlan{}));
}

BOOST_AUTO_TEST_CASE(sync_settings_are_checked) {
  ExperimentConfig cfg = experiment("equal", 12);
  cfg.plan.sync.mode = "gossip";
  CHECK_CONTAINS(error_of([&] { SyncPlan::initial(cfg, 2); }), "unknown sync mode 'gossip'");
  cfg.plan.sync.mode = "grouped";
  cfg.plan.sync.groups = {1, 2};
  CHECK_CONTAINS(error_of([&] { Plan::initial(cfg, 3, never_asked()); }), "give one group per worker");
}

BOOST_AUTO_TEST_SUITE_END()  // test_plan
