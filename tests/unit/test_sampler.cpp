// The global sampler: per-epoch permutations, the same global batch on every rank
// whatever the split, determinism, and argument checks.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/data/sampler.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_sampler)  // ctest's unit.test_sampler (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {


}  // namespace

BOOST_AUTO_TEST_CASE(iterations_per_epoch_drops_the_partial_batch) {
  BOOST_TEST(GlobalSampler(1000, 100, 1).iterations_per_epoch() == 10);
  BOOST_TEST(GlobalSampler(1099, 100, 1).iterations_per_epoch() == 10);
  BOOST_TEST(GlobalSampler(60000, 128, 1).iterations_per_epoch() == 468);
  BOOST_TEST(GlobalSampler(7, 7, 1).iterations_per_epoch() == 1);
  GlobalSampler s(1099, 100, 1);
  BOOST_TEST(s.epoch_of(0) == 0);
  BOOST_TEST(s.epoch_of(9) == 0);
  BOOST_TEST(s.epoch_of(10) == 1);
  BOOST_TEST(s.epoch_of(35) == 3);
}

// Within an epoch no index repeats; with no remainder an epoch covers the data set.
BOOST_AUTO_TEST_CASE(each_epoch_is_a_permutation) {
  for (int64_t size : {1000, 1037}) {
    GlobalSampler s(size, 100, 9);
    std::vector<int64_t> batch;
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::set<int64_t> seen;
      for (int64_t k = 0; k < s.iterations_per_epoch(); ++k) {
        s.global_batch(epoch * s.iterations_per_epoch() + k, batch);
        BOOST_REQUIRE(batch.size() == 100u);
        for (int64_t i : batch) {
          BOOST_REQUIRE((i >= 0 && i < size));
          BOOST_REQUIRE(seen.insert(i).second);  // distinct within the epoch
        }
      }
      BOOST_TEST(seen.size() == 1000u);
    }
  }
}

// Ranks splitting the batch 1 + 3 + 40 + 84 see exactly the batch of 128 that one
// rank would: the plan changes who computes what, never which samples a step sees.
BOOST_AUTO_TEST_CASE(slices_concatenate_to_the_global_batch) {
  GlobalSampler whole(60000, 128, 77);
  std::vector<int64_t> batch, part, joined;
  for (int64_t t : {0, 1, 467, 468, 1000}) {
    whole.global_batch(t, batch);
    // Every rank has its own sampler, as on a cluster.
    joined.clear();
    int64_t offset = 0;
    for (int64_t count : {1, 3, 40, 84}) {
      GlobalSampler rank(60000, 128, 77);
      rank.slice(t, offset, count, part);
      BOOST_REQUIRE(part.size() == static_cast<size_t>(count));
      joined.insert(joined.end(), part.begin(), part.end());
      offset += count;
    }
    BOOST_TEST(joined == batch, "iteration " << t);
    whole.slice(t, 128, 0, part);  // an idle rank's empty slice
    BOOST_TEST(part.empty());
  }
}

BOOST_AUTO_TEST_CASE(deterministic_across_instances_and_revisits) {
  GlobalSampler a(5000, 64, 123), b(5000, 64, 123);
  std::vector<int64_t> x, y, first;
  a.global_batch(3, first);
  for (int64_t t : {3, 100, 250, 3, 78}) {  // 78 is epoch 1; back to epoch 0 and forward again
    a.global_batch(t, x);
    b.global_batch(t, y);
    BOOST_TEST(x == y, "iteration " << t);
  }
  a.global_batch(3, x);
  BOOST_TEST(x == first);
  GlobalSampler other_seed(5000, 64, 124);
  other_seed.global_batch(3, y);
  BOOST_TEST(x != y);
}

BOOST_AUTO_TEST_CASE(epochs_differ) {
  GlobalSampler s(1000, 1000, 5);  // one iteration per epoch: the batch is the whole permutation
  std::vector<int64_t> e0, e1, e2;
  s.global_batch(0, e0);
  s.global_batch(1, e1);
  s.global_batch(2, e2);
  BOOST_TEST(e0 != e1);
  BOOST_TEST(e1 != e2);
  std::vector<int64_t> sorted = e1;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) BOOST_REQUIRE(sorted[i] == i);
}

BOOST_AUTO_TEST_CASE(argument_errors) {
  BOOST_TEST(contains(error_of([] { GlobalSampler(100, 0, 1); }), "global batch of 0"));
  const std::string big = error_of([] { GlobalSampler(100, 101, 1); });
  BOOST_TEST(contains(big, "101"), big);
  BOOST_TEST(contains(big, "100 samples"), big);
  GlobalSampler s(100, 10, 1);
  std::vector<int64_t> out;
  BOOST_TEST(contains(error_of([&] { s.slice(0, 5, 6, out); }), "[5, 11)"));
  BOOST_TEST(contains(error_of([&] { s.slice(0, -1, 2, out); }), "outside the global batch"));
  BOOST_TEST(contains(error_of([&] { s.global_batch(-1, out); }), "negative iteration"));
}

BOOST_AUTO_TEST_SUITE_END()  // test_sampler
