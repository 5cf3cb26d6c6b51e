// Uneven plans train exactly like one worker: the tandem binary trains 20 steps on
// 4 ranks (through its own mpirun launch) with a skewed plan (1, 3, 40, 84 of 128),
// with a plan that changes every step (zeros included), and with idle ranks
// (0, 0, 0, 128), and on 1 rank with the whole batch; the final parameters must
// agree within float tolerance. The model has dropout, whose masks must not depend
// on the split either.
#define BOOST_TEST_MODULE plan_equivalence
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/unit/test_support.hpp"

using namespace tandem::testing;

namespace {

const TempDir& scratch() {
  static TempDir dir("plan-equivalence");
  return dir;
}

std::vector<float> train(const std::string& name, const std::string& args) {
  const std::string out = scratch().file(name);
  const std::string cmd = std::string(TANDEM_BINARY) + " run " + TANDEM_SOURCE_DIR +
                          "/scripts/experiments/quickstart.lua model_args.hidden=64 model_args.dropout=0.2 "
                          "global_batch=128 stop.max_iterations=20 stop.target_accuracy=1 eval_every=1000 "
                          "save_params=true log_level=warn --out " + out + " " + args;
  BOOST_TEST_MESSAGE(cmd);
  BOOST_REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "tandem failed: " << cmd);
  std::ifstream in(out + "/params.f32", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> params(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(params.size() * sizeof(float)),
            reinterpret_cast<char*>(params.data()));
  BOOST_REQUIRE(!params.empty());
  return params;
}

// Largest difference relative to the largest parameter.
double scaled_difference(const std::vector<float>& a, const std::vector<float>& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double diff = 0.0, scale = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(a[i])));
  }
  return diff / scale;
}

}  // namespace

BOOST_AUTO_TEST_CASE(any_plan_gives_the_parameters_of_one_worker) {
  const auto one = train("one", "");
  const auto skewed = train("skewed", "--workers 4 plan.kind=fixed plan.batches=1,3,40,84");
  const auto changing = train("changing", "--workers 4 plan.kind=random");
  const auto idle = train("idle", "--workers 4 plan.kind=fixed plan.batches=0,0,0,128");
  std::cout << ("scaled differences: skewed ") << scaled_difference(one, skewed) << ", changing "
                                                   << scaled_difference(one, changing) << ", idle "
                                                   << scaled_difference(one, idle) << std::endl;
  BOOST_TEST(scaled_difference(one, skewed) < 1e-5);
  BOOST_TEST(scaled_difference(one, changing) < 1e-5);
  BOOST_TEST(scaled_difference(one, idle) < 1e-5);
  // And training happened: the parameters moved from their initial values.
  const auto untrained = train("untrained", "stop.max_iterations=1 lr=1e-9");
  BOOST_TEST(scaled_difference(one, untrained) > 1e-3);
}
