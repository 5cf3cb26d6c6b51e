// Gradient buckets (engine/train/sync/gradient_buckets.hpp): how the buffer is cut,
// that buckets leave for their sums in the order the backward pass finishes them and
// the last one (with the control) only when told, that the squared norms are taken
// before a bucket leaves, and that a sum that never completes ends in an error at the
// deadline instead of a hang. The sums here are a stand-in transport in this process
// (two ranks holding the same gradients: every sum doubles its floats); the sums over
// MPI between ranks are tests/integration/test_sync_modes.cpp's.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <mutex>
#include <numeric>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/nn/model.hpp"
#include "engine/sim/network_model.hpp"
#include "engine/train/sync/gradient_buckets.hpp"
#include "tests/unit/test_support.hpp"
#include "tests/unit/tiny_mlp.hpp"

BOOST_AUTO_TEST_SUITE(test_gradient_buckets)  // ctest's unit.test_gradient_buckets (tests/CMakeLists.txt)

using namespace tandem;
using tandem::testing::tiny_mlp;

namespace {

// Two identical ranks' sum: doubles the floats, after `polls` calls of pending();
// never, with polls < 0. Records the order the sums started in.
class DoublingSums final : public AsyncAllreduce {
public:
  explicit DoublingSums(int polls) : polls_(polls) {}
  void start(float* data, size_t count, size_t, const char*) override {
    std::lock_guard<std::mutex> lock(mu_);
    started.push_back(data);
    open_.push_back({data, count, polls_});
  }
  size_t pending(const char*) override {
    std::lock_guard<std::mutex> lock(mu_);
    while (!open_.empty() && open_.front().polls == 0) {
      for (size_t i = 0; i < open_.front().count; ++i) open_.front().data[i] *= 2.0f;
      open_.erase(open_.begin());
    }
    if (!open_.empty() && open_.front().polls > 0) --open_.front().polls;
    return open_.size();
  }
  std::vector<float*> started;

private:
  struct Sum {
    float* data;
    size_t count;
    int polls;
  };
  std::mutex mu_;
  std::vector<Sum> open_;
  int polls_;
};

}  // namespace

// Cut at layer boundaries once a bucket holds the bytes, from the end; the rest, with
// the control, is the last bucket; no size: one bucket.
BOOST_AUTO_TEST_CASE(buckets_are_cut_from_the_end_at_layer_boundaries) {
  // Layers of 100, 50, 300 and 40 gradients (offsets 0, 100, 150, 450; 490 in all),
  // the control 16 floats ahead.
  const std::vector<size_t> points{450, 150, 100, 0};
  const auto b = plan_buckets(points, 16, 490, 200 * sizeof(float));
  BOOST_REQUIRE(b.size() == 2);
  BOOST_TEST(b[0].begin == 16 + 150);  // the last two layers: 340 floats
  BOOST_TEST(b[0].end == 16 + 490);
  BOOST_TEST(b[1].begin == 0);  // the first two layers and the control
  BOOST_TEST(b[1].end == 16 + 150);
  const auto each = plan_buckets(points, 16, 490, 1.0);  // every layer its own
  BOOST_REQUIRE(each.size() == 4);
  BOOST_TEST(each[0].begin == 16 + 450);
  BOOST_TEST(each[3].end == 16 + 100);
  const auto one = plan_buckets(points, 16, 490, 0.0);
  BOOST_REQUIRE(one.size() == 1);
  BOOST_TEST(one[0].begin == 0);
  BOOST_TEST(one[0].end == 16 + 490);
}

// A real model's backward pass tells the buckets, which leave in order as their
// layers finish; the last waits for hand_rest(); every float is summed once, and
// the norm of the buckets handed over plus the rest's is the whole gradient's.
BOOST_AUTO_TEST_CASE(backward_hands_buckets_over_in_order) {
  Model model(cpu_device(), tiny_mlp(), 3);
  const size_t params = model.param_count(), control = 16;
  Tensor buffer(cpu_device(), {static_cast<int64_t>(control + params)});
  cpu_device().fill(buffer.data(), control, 1.0f);
  model.place_grads(buffer.data() + control);
  auto sums = std::make_unique<DoublingSums>(3);
  DoublingSums* seen = sums.get();
  const auto plan = plan_buckets(model.gradient_ready_points(), control, params, 1.0);
  BOOST_REQUIRE(plan.size() >= 2);
  GradientBuckets buckets(std::move(sums), cpu_device(), buffer.data(), control, plan, 10.0);

  for (int step = 0; step < 2; ++step) {
    Tensor x(cpu_device(), {5, model.input_shape()[0]});
    for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(std::sin(0.3 * i + step));
    buckets.begin();
    StepContext ctx;
    ctx.grads_ready = &buckets;
    const Tensor& y = model.forward(x, ctx);
    Tensor dy(cpu_device(), y.shape());
    for (int64_t i = 0; i < dy.numel(); ++i) dy.data()[i] = static_cast<float>(std::cos(0.7 * i));
    model.backward(dy, ctx);
    const std::vector<float> mine = model.grads().to_host();
    const double whole = std::inner_product(mine.begin(), mine.end(), mine.begin(), 0.0);
    const size_t rest = buckets.unhanded();
    BOOST_TEST(rest == plan.back().end - control);  // all but the last left during backward
    double rest_sq = 0.0;
    for (size_t i = 0; i < rest; ++i) rest_sq += double(mine[i]) * mine[i];
    BOOST_TEST(buckets.handed_sq() + rest_sq == whole, boost::test_tools::tolerance(1e-6));
    buckets.hand_rest();
    buckets.finish("the test's sums");
    const std::vector<float> summed = model.grads().to_host();
    for (size_t i = 0; i < params; ++i) BOOST_TEST_REQUIRE(summed[i] == 2.0f * mine[i]);
    BOOST_TEST(buffer.data()[0] == 2.0f);  // the control rode in the last bucket
    cpu_device().fill(buffer.data(), control, 1.0f);
    // The sums started in the order the backward pass finished the buckets.
    BOOST_REQUIRE(seen->started.size() == plan.size() * static_cast<size_t>(step + 1));
    for (size_t i = 0; i < plan.size(); ++i)
      BOOST_TEST(seen->started[plan.size() * static_cast<size_t>(step) + i] == buffer.data() + plan[i].begin);
    for (const auto& s : buckets.spans()) BOOST_TEST(s.end_ms >= s.start_ms);
  }
}

// A sum asked for without a backward pass that told (no begin()): every bucket is
// summed, none taken for one already summed at the step before.
BOOST_AUTO_TEST_CASE(a_sum_without_a_backward_pass_sums_every_bucket) {
  std::vector<float> buffer(64, 1.0f);
  GradientBuckets buckets(std::make_unique<DoublingSums>(1), cpu_device(), buffer.data(), 16,
                          plan_buckets({32, 0}, 16, 48, 1.0), 10.0);
  for (float want : {2.0f, 4.0f}) {
    buckets.hand_rest();
    buckets.finish("the test's sums");
    BOOST_TEST(buffer[0] == want);
    BOOST_TEST(buffer[63] == want);
  }
}

// A sum that never completes (a rank died mid-bucket) is an error at the deadline,
// naming the bucket, not a hang; the buckets shut down cleanly after it.
BOOST_AUTO_TEST_CASE(a_sum_that_never_ends_fails_at_the_deadline) {
  std::vector<float> buffer(64, 1.0f);
  GradientBuckets buckets(std::make_unique<DoublingSums>(-1), cpu_device(), buffer.data(), 16,
                          plan_buckets({32, 0}, 16, 48, 1.0), 0.2);
  buckets.begin();
  buckets.ready_from(32);
  buckets.hand_rest();
  BOOST_CHECK_EXCEPTION(buckets.finish("the gradient all-reduce"), Error, [](const Error& e) {
    const std::string m = e.what();
    return m.find("gradient bucket 1 of 2 was not summed within 0.2 s") != std::string::npos &&
           m.find("collective_timeout_s") != std::string::npos;
  });
}

// When the gradients from an offset on are final, as a fraction of the step's compute
// (bucket_plan.hpp): the simulator's buckets and an emulated device's start by it.
BOOST_AUTO_TEST_CASE(gradients_are_final_at_the_backward_pass_pace) {
  const auto close = boost::test_tools::tolerance(1e-12);
  BOOST_TEST(ready_fraction(0, 1000, 0.75, 1) == 1.0, close);          // all of them: the compute's end
  BOOST_TEST(ready_fraction(1000, 1000, 0.75, 1) == 0.25, close);      // none: the forward pass's end
  BOOST_TEST(ready_fraction(600, 1000, 0.75, 1) == 1.0 - 0.45, close);  // the last 40%
  BOOST_TEST(ready_fraction(600, 1000, 0.75, 3) == 1.0 - 0.15, close);  // in the last of 3 passes
  BOOST_TEST(ready_fraction(5000, 1000, 0.75, 0) == 0.25, close);       // clamped; 0 passes taken as 1
  BOOST_TEST(ready_fraction(0, 0, 0.75, 1) == 1.0, close);             // no gradients
  // A model's backward share: 2 of every 3 FLOPs but the first layer's input gradient.
  Model mlp(cpu_device(), tiny_mlp(), 3);
  const double macs = mlp.forward_macs_per_sample();
  BOOST_TEST(mlp.backward_share() == 1.0 - 2.0 * macs / mlp.train_flops_per_sample(), close);
  BOOST_TEST(mlp.backward_share() > 0.5);
  BOOST_TEST(mlp.backward_share() < 2.0 / 3.0);
}

// The simulator's buckets (engine/sim/network_model.hpp): a bucket's ring starts once
// the slowest worker's backward pass (its compute's last two thirds here) has
// finished it and the rings before it are done; bf16 halves the bytes.
BOOST_AUTO_TEST_CASE(the_simulator_overlaps_buckets_with_the_backward_pass) {
  SimConfig sim;
  sim.latency_us = 0.0;
  sim.bandwidth_gb_s = 1e-3;  // 1,000 bytes a millisecond: a ring of 2 moves `bytes` in bytes / 1000 ms
  CommConfig comm;
  comm.bucket_mb = 1e-6;  // every layer a bucket
  EmulationConfig emulation;
  const Emulator emulator(emulation, 2);
  GradientLayout layout;
  layout.params = 1000;
  layout.floats = 1016;
  layout.ready_points = {900, 500, 0};
  const NetworkModel net(sim, comm, emulator, 2, layout);
  BOOST_REQUIRE(net.bucketed());
  BOOST_TEST(net.buckets() == 3u);
  // Bucket 1 (100 floats) is ready at 0.4 of the compute, bucket 2 (400) at 2/3, the
  // last (500 and the control's 16) at the end; the slower worker computes 60 ms.
  const NetworkModel::Sums s = net.bucket_sums({30.0, 60.0});
  const auto close = boost::test_tools::tolerance(1e-9);
  BOOST_TEST(s.first_start_ms == 24.0, close);
  BOOST_TEST(s.end_ms == 60.0 + 516 * 4 / 1000.0, close);
  // The network slower than the backward pass: the rings queue behind each other.
  SimConfig slow_sim = sim;
  slow_sim.bandwidth_gb_s = 1e-4;  // 100 bytes a millisecond
  const NetworkModel::Sums slow = NetworkModel(slow_sim, comm, emulator, 2, layout).bucket_sums({3.0, 6.0});
  BOOST_TEST(slow.end_ms == 2.4 + 4.0 + 16.0 + 20.64, close);
  // The faster worker in 2 micro-batches: only the last pass's backward tells, so its
  // bucket 1 is ready at 1 - (2/3)(0.9)/2 = 0.7 of its 60 ms, after the other's 0.4 of 60.
  BOOST_TEST(net.bucket_sums({60.0, 60.0}, {2, 1}).first_start_ms == 42.0, close);
  comm.dtype = "bf16";
  const NetworkModel half(sim, comm, emulator, 2, layout);
  BOOST_TEST(half.bucket_sums({30.0, 60.0}).end_ms == 60.0 + 516 * 2 / 1000.0, close);
  BOOST_TEST(half.allreduce_ms() == net.allreduce_ms() / 2, close);
  comm.bucket_mb = 0.0;  // one all-reduce after the backward pass
  BOOST_TEST(!NetworkModel(sim, comm, emulator, 2, layout).bucketed());
  // Two levels: 4 workers, 2 a host: the ring runs among the 2 hosts.
  comm.dtype = "fp32";
  const Emulator four(emulation, 4);
  SimConfig hosts = sim;
  hosts.ranks_per_host = 2;
  BOOST_TEST(NetworkModel(hosts, comm, four, 4, layout).allreduce_ms() == net.allreduce_ms(), close);
  BOOST_TEST(NetworkModel(sim, comm, four, 4, layout).allreduce_ms() == 1.5 * net.allreduce_ms(), close);
}

BOOST_AUTO_TEST_SUITE_END()  // test_gradient_buckets
