// The memory check before a run allocates its model (engine/train/memory_check.hpp):
// the footprint of a known model counted by hand, the largest local batch each kind
// of plan can give a worker, and a model far too big for any machine refused,
// naming the numbers, without allocating it.
#include <boost/test/unit_test.hpp>

#include <string>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/nn/model.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/train/memory_check.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_memory_check)  // ctest's unit.test_memory_check (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

const std::string kQuickstart = std::string(TANDEM_SOURCE_DIR) + "/scripts/experiments/quickstart.lua";

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

// The quickstart's MLP, 784-256-256-10: its parameters, and per sample the input
// (784) plus each layer's output and its gradient (the flatten's 784; the two fused
// linear+ReLU's 256; the last linear's 10).
BOOST_AUTO_TEST_CASE(the_quickstart_mlp_is_counted_as_by_hand) {
  const ExperimentConfig cfg = load_experiment(kQuickstart, {});
  const ModelFootprint f = model_footprint(cfg.model);
  BOOST_TEST(f.params == (784 * 256 + 256) + (256 * 256 + 256) + (256 * 10 + 10));
  BOOST_TEST(f.buffer_floats_per_sample == 784 + 2.0 * (784 + 256 + 256 + 10));

  const MemoryNeed need = memory_need(f, cfg, largest_local_batch(cfg, 1, 0));
  BOOST_TEST(need.params_bytes == 4.0 * f.params);
  BOOST_TEST(need.grads_bytes == need.params_bytes);
  BOOST_TEST(need.optimizer_bytes == need.params_bytes);  // momentum 0.9: a velocity
  BOOST_TEST(need.sync_bytes == 0.0);                     // bsp
  // Evaluating 1000 samples forward weighs more than training 64.
  BOOST_TEST(need.eval_batch);
  BOOST_TEST(need.batch == 1000);
  BOOST_TEST(need.total() < 12 * kMiB, bytes_text(need.total()));
}

// AdamW keeps two moments; accumulation sums the micro-batches in the gradients
// themselves (no second buffer), and holds the buffers of one micro-batch at a time.
BOOST_AUTO_TEST_CASE(adamw_and_accumulation_are_counted) {
  ExperimentConfig cfg = load_experiment(kQuickstart, {"optimizer=adamw", "eval_batch=1"});
  const ModelFootprint f = model_footprint(cfg.model);
  const MemoryNeed one = memory_need(f, cfg, 64);
  BOOST_TEST(one.optimizer_bytes == 2.0 * one.params_bytes);
  cfg.accumulate = 4;
  const MemoryNeed four = memory_need(f, cfg, 64);
  BOOST_TEST(four.grads_bytes == four.params_bytes);
  BOOST_TEST(four.batch == 16);
  BOOST_TEST(four.buffers_bytes == one.buffers_bytes / 4.0, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(the_largest_local_batch_follows_the_plan) {
  ExperimentConfig cfg;
  cfg.global_batch = 100;
  BOOST_TEST(largest_local_batch(cfg, 3, 0) == 34);  // equal: B / N, rounded up
  cfg.plan.kind = "fixed";
  cfg.plan.batches = {10, 60, 30};
  BOOST_TEST(largest_local_batch(cfg, 3, 1) == 60);
  cfg.plan.kind = "random";
  BOOST_TEST(largest_local_batch(cfg, 3, 1) == 100);  // any split, the whole batch included
  cfg.policy.file = "lbb";
  cfg.policy.max_batch = {50, 40, 100};
  BOOST_TEST(largest_local_batch(cfg, 3, 1) == 40);  // a policy: up to the worker's bound
}

BOOST_AUTO_TEST_CASE(a_need_past_the_device_is_refused_with_the_numbers) {
  ExperimentConfig cfg = load_experiment(kQuickstart, {});
  ModelFootprint f;
  f.params = 1000000000;  // 4 GB a copy
  f.buffer_floats_per_sample = 1000;
  const MemoryNeed need = memory_need(f, cfg, 64);
  DeviceMemory small{8.0 * 1024 * kMiB, "its device, the CPU, has 8.0 GiB (MemAvailable on this host)"};
  const std::string msg = error_of([&] { check_fits(need, small, cfg, 0); });
  CHECK_CONTAINS(msg, "model 'mlp' needs ~11.2 GiB on worker 0 (parameters 3.7 GiB, gradients 3.7 GiB, "
                      "optimizer state 3.7 GiB, activations 1.9 MiB at evaluation batch 1000)");
  CHECK_CONTAINS(msg, "but its device, the CPU, has 8.0 GiB");
  CHECK_CONTAINS(msg, "model_args (now {\"hidden\":[256,256]}, read by models/mlp.lua)");
  DeviceMemory big{64.0 * 1024 * kMiB, "64 GiB"};
  check_fits(need, big, cfg, 0);  // fits: no error
  DeviceMemory unknown{0.0, ""};
  check_fits(need, unknown, cfg, 0);  // not known: not checked
}

// The model grew to 11.8 GB before it was stopped; at 250000 x 250000 (62.7
// billion parameters, 703 GiB with gradients and momentum) no machine holds it, so
// the refusal is certain, and it comes at once.
BOOST_AUTO_TEST_CASE(a_model_too_big_for_the_machine_is_refused_before_allocating) {
  // "At once" in CPU time (DESIGN.md habit 13: a loaded machine stretches the wall
  // clock): allocating, or even touching, 700 GiB would take far more than 5 s.
  const double start_cpu = cpu_clock_ms(CLOCK_PROCESS_CPUTIME_ID);
  const std::string msg = error_of([&] {
    check_model_memory(load_experiment(kQuickstart, {"model_args.hidden=250000,250000", "device=cpu"}), 1, false);
  });
  const double took_s = (cpu_clock_ms(CLOCK_PROCESS_CPUTIME_ID) - start_cpu) / 1000.0;
  CHECK_CONTAINS(msg, "model 'mlp' needs ~70");  // 702.6 GiB
  CHECK_CONTAINS(msg, "(parameters 233.");
  CHECK_CONTAINS(msg, "refused before allocating it");
  CHECK_CONTAINS(msg, "lower the batch");
  BOOST_TEST(took_s < 5.0);
}

// Where nothing gives a cap, each worker's micro-batch cap is what its share of the
// host's memory holds past the model's fixed needs (issue 37 part 4): positive, the
// same for every CPU rank of one host, smaller with more ranks sharing it, and
// smaller for a model whose sample weighs more.
BOOST_AUTO_TEST_CASE(measured_micro_caps_follow_the_memory_and_the_model) {
  const ExperimentConfig cfg = load_experiment(kQuickstart, {"device=cpu"});
  std::vector<std::string> why;
  const std::vector<int64_t> two = measured_micro_caps(cfg, 2, &why);
  BOOST_REQUIRE(two.size() == 2u);
  if (two[0] == 0) return;  // /proc/meminfo unreadable here: nothing measured
  BOOST_TEST(two[0] == two[1]);
  BOOST_TEST(why.size() == 2u);
  CHECK_CONTAINS(why[0], "worker 0 holds " + std::to_string(two[0]) + " samples at once");
  const ModelFootprint f = model_footprint(cfg.model);
  // About MemTotal / 2 over the bytes of a sample (the fixed part is 1 MiB here).
  const double per_sample = f.buffer_floats_per_sample * 4.0;
  BOOST_TEST(static_cast<double>(two[0]) * per_sample > 1e6);
  const std::vector<int64_t> four = measured_micro_caps(cfg, 4, nullptr);
  BOOST_TEST(four[0] < two[0]);
  const ExperimentConfig wide = load_experiment(kQuickstart, {"device=cpu", "model_args.hidden={4096, 4096}"});
  BOOST_TEST(measured_micro_caps(wide, 2, nullptr)[0] < two[0]);
}

BOOST_AUTO_TEST_SUITE_END()  // test_memory_check
