// The fused step (engine/train/step.hpp): the whole step queued on the device, the
// skip of a non-finite step decided there (kernels/step_rule.hpp), and its capture in
// a graph replayed per input. Checked bit for bit against the step the host decides
// (compute() then update()), and, for capture and replay, on a CPU device that
// records ops the way a CUDA stream captures them (tests/unit/recording_device.hpp).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"
#include "engine/data/synthetic.hpp"
#include "engine/train/device_input.hpp"
#include "engine/train/evaluate.hpp"
#include "engine/train/step.hpp"
#include "tests/unit/tiny_mlp.hpp"
#include "tests/unit/recording_device.hpp"

BOOST_AUTO_TEST_SUITE(test_fused_step)  // ctest's unit.test_fused_step (tests/CMakeLists.txt)

using namespace tandem;

using testing::tiny_mlp;

namespace {


OptimizerConfig config(const std::string& name, double clip) {
  OptimizerConfig cfg;
  cfg.name = name;
  cfg.lr = 0.05;
  cfg.momentum = 0.9;
  cfg.weight_decay = 0.01;
  cfg.clip_grad_norm = clip;
  return cfg;
}

// One worker's model, optimizer and step on a device.
struct Worker {
  Worker(Device& dev, const OptimizerConfig& cfg, int64_t accumulate = 1, double dropout = 0.0)
      : model(dev, tiny_mlp(dropout), 7), optimizer(make_optimizer(dev, model, cfg)),
        step(model, *optimizer, accumulate) {}
  Model model;
  std::unique_ptr<Optimizer> optimizer;
  TrainStep step;
};

// A batch on `dev`: n samples of 7 values and their labels (host memory, as the CPU's).
struct Batch {
  Batch(Device& dev, int64_t n, int seed) : x(dev, {n, 7}), labels(static_cast<size_t>(n)) {
    std::vector<float> v(static_cast<size_t>(n * 7));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i + 11 * seed));
    x.from_host(v.data(), v.size());
    for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = static_cast<int32_t>((i * 5 + seed) % 3);
  }
  Tensor x;
  std::vector<int32_t> labels;
};

// The step as the bsp loop takes it when the host decides: compute, check, update.
FusedResult host_decided(Worker& w, const Batch& b, const StepContext& ctx, double lr, bool poison) {
  const LossResult loss = w.step.compute(b.x, b.labels.data(), ctx);
  Device& dev = w.model.device();
  if (poison) dev.fill(w.model.grads().data(), 1, std::nanf(""));
  const double grad_sq = dev.sum_squares(w.model.grads().data(), w.model.param_count());
  FusedResult r;
  r.loss = loss;
  r.finite = std::isfinite(loss.loss_sum) && std::isfinite(grad_sq);
  if (r.finite) w.step.update(b.x.dim(0), lr, grad_sq);
  return r;
}

void check_same(Worker& a, Worker& b, const std::string& when) {
  const std::vector<float> pa = a.model.params().to_host(), pb = b.model.params().to_host();
  BOOST_TEST_REQUIRE(pa.size() == pb.size());
  size_t differ = 0;
  for (size_t i = 0; i < pa.size(); ++i) differ += pa[i] != pb[i];  // bit for bit (no NaN here)
  BOOST_TEST(differ == 0u, when << ": " << differ << " of " << pa.size() << " parameters differ");
  BOOST_TEST(a.optimizer->steps() == b.optimizer->steps(), when);
}

StepContext context(int t) {
  StepContext ctx;
  ctx.seed = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(t + 1);  // all 64 bits in play
  return ctx;
}

double lr_at(int t) { return 0.05 / (1.0 + 0.1 * t); }  // changes every step: replays must see it

}  // namespace

BOOST_AUTO_TEST_CASE(fused_step_is_the_host_decided_step_bit_for_bit) {
  // SGD with momentum and AdamW, with and without clipping, micro-batches or not; a
  // NaN in the gradient at step 3 (skipped both ways), a clipped gradient elsewhere.
  for (const std::string name : {"sgd", "adamw"})
    for (double clip : {0.0, 0.05})
      for (int64_t accumulate : {int64_t{1}, int64_t{3}}) {
        Worker fused(cpu_device(), config(name, clip), accumulate), host(cpu_device(), config(name, clip), accumulate);
        const Batch b1(cpu_device(), 8, 1), b2(cpu_device(), 5, 2);
        for (int t = 0; t < 8; ++t) {
          const Batch& b = t % 2 ? b2 : b1;
          const bool poison = t == 3;
          const std::string when = name + " clip " + std::to_string(clip) + " accumulate " +
                                   std::to_string(accumulate) + " step " + std::to_string(t);
          const FusedResult f = fused.step.fused(b.x, b.labels.data(), context(t), lr_at(t), poison);
          const FusedResult h = host_decided(host, b, context(t), lr_at(t), poison);
          BOOST_TEST(f.finite == !poison, when);
          BOOST_TEST(f.finite == h.finite, when);
          BOOST_TEST(f.loss.loss_sum == h.loss.loss_sum, when);
          BOOST_TEST(f.loss.correct == h.loss.correct, when);
          BOOST_TEST(!f.replayed, when);  // the CPU device does not capture
          if (clip > 0.0 && f.finite) BOOST_TEST(fused.step.last_grad_norm() == host.step.last_grad_norm(), when);
          check_same(fused, host, when);
        }
        BOOST_TEST(fused.optimizer->steps() == 7);  // the poisoned step was not taken
        BOOST_TEST(fused.step.graph_counts().eager == 8);
      }
}

BOOST_AUTO_TEST_CASE(a_clipped_step_reports_the_norm_before_clipping) {
  Worker w(cpu_device(), config("sgd", 1e-4), 1);
  const Batch b(cpu_device(), 8, 3);
  const FusedResult f = w.step.fused(b.x, b.labels.data(), context(0), 0.1);
  BOOST_TEST(f.grad_norm > 1e-4);  // well past the limit, so the update was clipped
  BOOST_TEST(w.step.last_grad_norm() == f.grad_norm);
}

BOOST_AUTO_TEST_CASE(captured_steps_replay_bit_for_bit_with_new_scalars) {
  // Two inputs (different buffers and sizes) in turn, the learning rate changing every
  // step. An input runs op by op until a run of it allocates nothing, is captured at
  // its next sighting and replays from then on. The first input's first run grows the
  // buffers, so it is captured at its third sighting (step 4); the second, smaller,
  // allocates nothing at its first (step 1) and is captured at its second (step 3).
  for (const std::string name : {"sgd", "adamw"}) {
    test::RecordingDevice rec;
    Worker graphed(rec, config(name, 0.05)), plain(cpu_device(), config(name, 0.05));
    BOOST_TEST_REQUIRE(graphed.step.graphs());
    BOOST_TEST(!plain.step.graphs());
    const Batch g1(rec, 8, 1), g2(rec, 5, 2), p1(cpu_device(), 8, 1), p2(cpu_device(), 5, 2);
    for (int t = 0; t < 14; ++t) {
      const bool second = t % 2;
      const FusedResult a = graphed.step.fused(second ? g2.x : g1.x, (second ? g2 : g1).labels.data(), context(t),
                                               lr_at(t));
      const FusedResult b = plain.step.fused(second ? p2.x : p1.x, (second ? p2 : p1).labels.data(), context(t),
                                             lr_at(t));
      const std::string when = name + " step " + std::to_string(t);
      BOOST_TEST(a.replayed == (t >= 3), when);
      BOOST_TEST(a.loss.loss_sum == b.loss.loss_sum, when);
      check_same(graphed, plain, when);
    }
    const GraphCounts& c = graphed.step.graph_counts();
    BOOST_TEST(c.captured == 2);
    BOOST_TEST(c.replayed == 11);
    BOOST_TEST(c.eager == 3);
    BOOST_TEST(rec.graphs_held() == 2u);
    BOOST_TEST(rec.ops_recorded() > 10);
  }
}

BOOST_AUTO_TEST_CASE(graphs_are_dropped_when_device_memory_moves) {
  test::RecordingDevice rec;
  Worker graphed(rec, config("sgd", 0.0)), plain(cpu_device(), config("sgd", 0.0));
  const Batch g(rec, 8, 4), p(cpu_device(), 8, 4);
  int t = 0;
  auto both = [&] {
    const FusedResult a = graphed.step.fused(g.x, g.labels.data(), context(t), lr_at(t));
    plain.step.fused(p.x, p.labels.data(), context(t), lr_at(t));
    check_same(graphed, plain, "step " + std::to_string(t));
    ++t;
    return a.replayed;
  };
  for (int i = 0; i < 4; ++i) both();
  BOOST_TEST(graphed.step.graph_counts().captured == 1);
  { Tensor elsewhere(rec, {1000}); }  // an allocation and a free: the graph's pointers are suspect
  BOOST_TEST(!both());  // dropped, so op by op (and it allocates nothing: warm at once)
  BOOST_TEST(graphed.step.graph_counts().invalidated == 1);
  BOOST_TEST(rec.graphs_held() == 0u);
  BOOST_TEST(both());  // captured again
  BOOST_TEST(both());
  BOOST_TEST(graphed.step.graph_counts().captured == 2);
}

BOOST_AUTO_TEST_CASE(a_poisoned_step_runs_op_by_op_and_is_skipped_on_the_device) {
  test::RecordingDevice rec;
  Worker graphed(rec, config("adamw", 0.0)), plain(cpu_device(), config("adamw", 0.0));
  const Batch g(rec, 6, 5), p(cpu_device(), 6, 5);
  for (int t = 0; t < 8; ++t) {
    const bool poison = t == 5;
    const FusedResult a = graphed.step.fused(g.x, g.labels.data(), context(t), lr_at(t), poison);
    plain.step.fused(p.x, p.labels.data(), context(t), lr_at(t), poison);
    BOOST_TEST(a.finite == !poison);
    BOOST_TEST(a.replayed == (t >= 2 && !poison), "step " << t);
    check_same(graphed, plain, "step " + std::to_string(t));
  }
  BOOST_TEST(graphed.optimizer->steps() == 7);
}

BOOST_AUTO_TEST_CASE(a_capture_that_fails_falls_back_to_op_by_op) {
  // An op the capture refuses: that input runs op by op from then on (and trains as
  // ever); after three inputs failed, the step stops trying graphs at all.
  test::RecordingDevice rec;
  rec.refuse("decide_step");
  Worker graphed(rec, config("sgd", 0.0)), plain(cpu_device(), config("sgd", 0.0));
  const Batch g1(rec, 8, 6), g2(rec, 7, 7), g3(rec, 6, 8), g4(rec, 5, 9);
  const Batch p1(cpu_device(), 8, 6), p2(cpu_device(), 7, 7), p3(cpu_device(), 6, 8), p4(cpu_device(), 5, 9);
  const Batch* gs[] = {&g1, &g2, &g3, &g4};
  const Batch* ps[] = {&p1, &p2, &p3, &p4};
  int t = 0;
  auto both = [&](int input) {
    const FusedResult a = graphed.step.fused(gs[input]->x, gs[input]->labels.data(), context(t), lr_at(t));
    plain.step.fused(ps[input]->x, ps[input]->labels.data(), context(t), lr_at(t));
    BOOST_TEST(!a.replayed);
    check_same(graphed, plain, "step " + std::to_string(t));
    ++t;
  };
  for (int i = 0; i < 5; ++i) both(0);  // the first input: warmed, its capture fails, op by op
  BOOST_TEST(graphed.step.graphs(), "one input's failure leaves graphs on");
  for (int input : {1, 2})
    for (int i = 0; i < 3; ++i) both(input);
  BOOST_TEST(!graphed.step.graphs(), "three failed inputs turn graphs off");
  for (int i = 0; i < 3; ++i) both(3);
  BOOST_TEST(graphed.step.graph_counts().captured == 0);
  BOOST_TEST(rec.graphs_held() == 0u);
}

BOOST_AUTO_TEST_CASE(dropout_masks_follow_the_seed_in_device_memory) {
  // Dropout reads the iteration's seed where the fused step wrote it, so replays draw
  // each step's own masks: the same masks as the step op by op, which takes the seed
  // as a value (micro-batches too: the masks are keyed by sample position).
  for (int64_t accumulate : {int64_t{1}, int64_t{2}}) {
    test::RecordingDevice rec;
    Worker graphed(rec, config("adamw", 0.0), accumulate, 0.3), host(cpu_device(), config("adamw", 0.0), accumulate, 0.3);
    BOOST_TEST_REQUIRE(graphed.step.graphs());
    const Batch g(rec, 8, 10), p(cpu_device(), 8, 10);
    for (int t = 0; t < 6; ++t) {
      const FusedResult a = graphed.step.fused(g.x, g.labels.data(), context(t), lr_at(t));
      const FusedResult b = host_decided(host, p, context(t), lr_at(t), false);
      BOOST_TEST(a.replayed == (t >= 2), "step " << t);
      BOOST_TEST(a.loss.loss_sum == b.loss.loss_sum, "step " << t);
      check_same(graphed, host, "accumulate " + std::to_string(accumulate) + " step " + std::to_string(t));
    }
  }
}

BOOST_AUTO_TEST_CASE(models_that_cannot_be_captured_say_so) {
  BOOST_TEST(Model(cpu_device(), tiny_mlp(0.0), 1).capturable());
  BOOST_TEST(Model(cpu_device(), tiny_mlp(0.2), 1).capturable());  // its seed is read from device memory
  ModelSpec bn = tiny_mlp();
  bn.layers.insert(bn.layers.begin() + 1, {"batchnorm", {}, "test:bn"});
  BOOST_TEST(!Model(cpu_device(), bn, 1).capturable());  // its sums come to the host
  test::RecordingDevice rec;
  Model model(rec, bn, 1);
  const std::unique_ptr<Optimizer> opt = make_optimizer(rec, model, config("sgd", 0.0));
  TrainStep step(model, *opt);
  BOOST_TEST(!step.graphs());
  const Batch b(rec, 4, 7);
  for (int t = 0; t < 4; ++t) BOOST_TEST(!step.fused(b.x, b.labels.data(), context(t), 0.1).replayed);
  BOOST_TEST(rec.graphs_held() == 0u);
}

BOOST_AUTO_TEST_CASE(an_empty_batch_is_refused) {
  Worker w(cpu_device(), config("sgd", 0.0));
  const Tensor empty(cpu_device(), {0, 7});
  BOOST_CHECK_THROW(w.step.fused(empty, nullptr, context(0), 0.1), Error);
}

BOOST_AUTO_TEST_CASE(a_transformer_step_replays_bit_for_bit) {
  // A GPT without dropout (the experiment's default): embedding, two blocks (batched
  // attention products, layer norms, GELU, the causal softmax), the tied head; AdamW
  // with clipping. Tokens travel as floats, labels are one per position.
  ModelSpec spec;
  spec.name = "tiny-gpt";
  spec.input = {5};
  spec.classes = 11;
  spec.layers = {{"embedding", {{"n_embd", 8}, {"seq_len", 5}}, "test:1"}};
  for (int l = 0; l < 2; ++l) spec.layers.push_back({"transformer_block", {{"n_head", 2}, {"n_layer", 2}}, "test:2"});
  spec.layers.push_back({"layernorm", {}, "test:3"});
  spec.layers.push_back({"lm_head", {{"tied", 1}}, "test:4"});
  const OptimizerConfig cfg = config("adamw", 0.5);
  test::RecordingDevice rec;
  Model mg(rec, spec, 3), mp(cpu_device(), spec, 3);
  BOOST_TEST_REQUIRE(mg.capturable());
  const auto og = make_optimizer(rec, mg, cfg), op = make_optimizer(cpu_device(), mp, cfg);
  TrainStep sg(mg, *og), sp(mp, *op);
  std::vector<float> tokens(6 * 5);
  std::vector<int32_t> labels(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<float>((i * 7 + 3) % 11);
    labels[i] = static_cast<int32_t>((i * 7 + 10) % 11);
  }
  Tensor xg(rec, {6, 5}), xp(cpu_device(), {6, 5});
  xg.from_host(tokens.data(), tokens.size());
  xp.from_host(tokens.data(), tokens.size());
  for (int t = 0; t < 6; ++t) {
    const FusedResult a = sg.fused(xg, labels.data(), context(t), lr_at(t));
    const FusedResult b = sp.fused(xp, labels.data(), context(t), lr_at(t));
    BOOST_TEST(a.replayed == (t >= 2), "step " << t);
    BOOST_TEST(a.loss.loss_sum == b.loss.loss_sum, "step " << t);
    const std::vector<float> pg = mg.params().to_host(), pp = mp.params().to_host();
    BOOST_TEST((pg == pp), "step " << t << ": parameters differ");
  }
}

BOOST_AUTO_TEST_CASE(a_step_queued_before_the_last_is_read_trains_the_same) {
  // The bsp loop queues step t before it reads step t - 1. AdamW's bias corrections
  // then depend on an outcome the host has not read: the device takes them from the
  // step before's flag. NaNs at steps 2, 3 (two in a row) and 6; captured and replayed
  // on the recording device, op by op on the CPU, against the host-decided step.
  for (const bool graphs : {false, true}) {
    test::RecordingDevice rec;
    Device& dev = graphs ? static_cast<Device&>(rec) : cpu_device();
    Worker deferred(dev, config("adamw", 0.05)), host(cpu_device(), config("adamw", 0.05));
    const Batch g(dev, 8, 11), p(cpu_device(), 8, 11);
    std::vector<FusedResult> got, want;
    for (int t = 0; t < 10; ++t) {
      const bool poison = t == 2 || t == 3 || t == 6;
      deferred.step.fused_queue(g.x, g.labels.data(), context(t), lr_at(t), poison);
      if (t > 0) got.push_back(deferred.step.fused_finish());  // step t - 1, read after step t was queued
      BOOST_TEST(deferred.step.unread() == 1);
      want.push_back(host_decided(host, p, context(t), lr_at(t), poison));
      const std::vector<float> a = deferred.model.params().to_host(), b = host.model.params().to_host();
      BOOST_TEST((a == b), "parameters after step " << t);
    }
    got.push_back(deferred.step.fused_finish());
    BOOST_TEST(deferred.step.unread() == 0);
    BOOST_TEST_REQUIRE(got.size() == 10u);
    for (size_t t = 0; t < got.size(); ++t) {
      BOOST_TEST(got[t].finite == want[t].finite, "step " << t);
      BOOST_TEST(got[t].loss.loss_sum == want[t].loss.loss_sum, "step " << t);
    }
    check_same(deferred, host, graphs ? "replayed, read one step late" : "read one step late");
    BOOST_TEST(deferred.optimizer->steps() == 7);
    if (graphs) BOOST_TEST(deferred.step.graph_counts().replayed >= 4);
  }
  // Two unread when a third is queued is a bug of the caller's.
  Worker w(cpu_device(), config("sgd", 0.0));
  const Batch b(cpu_device(), 4, 12);
  w.step.fused_queue(b.x, b.labels.data(), context(0), 0.1);
  w.step.fused_queue(b.x, b.labels.data(), context(1), 0.1);
  BOOST_CHECK_THROW(w.step.fused_queue(b.x, b.labels.data(), context(2), 0.1), Error);
}

BOOST_AUTO_TEST_CASE(computes_replay_graphs_per_input_for_the_step_op_by_op) {
  // Several workers, or a policy, take the step op by op: compute(), then the host
  // (all-reduce, norm), then update(). With compute graphs on, compute() replays a
  // graph per input: two local batches in turn (a plan's two shapes, at two positions
  // in the global batch), dropout drawing each step's masks from the seed it wrote to
  // device memory, in one or two micro-batches. Every loss and every parameter equals
  // the uncaptured step's, bit for bit; each input is captured once.
  for (int64_t accumulate : {int64_t{1}, int64_t{2}}) {
    test::RecordingDevice rec;
    Worker graphed(rec, config("sgd", 0.05), accumulate, 0.3), plain(cpu_device(), config("sgd", 0.05), accumulate, 0.3);
    BOOST_TEST(!graphed.step.compute_graphs());  // off until asked
    graphed.step.set_compute_graphs(true);
    BOOST_TEST_REQUIRE(graphed.step.compute_graphs());
    const Batch g1(rec, 8, 1), g2(rec, 5, 2), p1(cpu_device(), 8, 1), p2(cpu_device(), 5, 2);
    for (int t = 0; t < 12; ++t) {
      const bool second = t % 2;
      StepContext ctx = context(t);
      ctx.first_sample = second ? 8 : 0;
      const LossResult a = graphed.step.compute(second ? g2.x : g1.x, (second ? g2 : g1).labels.data(), ctx);
      const LossResult b = plain.step.compute(second ? p2.x : p1.x, (second ? p2 : p1).labels.data(), ctx);
      const std::string when = "accumulate " + std::to_string(accumulate) + " step " + std::to_string(t);
      BOOST_TEST(a.loss_sum == b.loss_sum, when);
      BOOST_TEST(a.correct == b.correct, when);
      graphed.step.update(13, lr_at(t));
      plain.step.update(13, lr_at(t));
      check_same(graphed, plain, when);
    }
    const GraphCounts& c = graphed.step.graph_counts();
    BOOST_TEST(c.captured == 2);
    // As for the fused step: the larger input is captured at its third sighting (its
    // first grew the buffers), the smaller at its second.
    BOOST_TEST(c.eager == 3);
    BOOST_TEST(c.replayed == 9);
    BOOST_TEST(rec.graphs_held() == 2u);
    // The fused step keeps graphs of its own: a whole step is not a compute.
    const FusedResult f = graphed.step.fused(g1.x, g1.labels.data(), context(12), lr_at(12));
    BOOST_TEST(!f.replayed);
  }
}

BOOST_AUTO_TEST_CASE(compute_graphs_stay_off_where_the_step_cannot_be_captured) {
  Worker cpu(cpu_device(), config("sgd", 0.0));
  cpu.step.set_compute_graphs(true);
  BOOST_TEST(!cpu.step.compute_graphs());  // the CPU device does not capture
  test::RecordingDevice rec;
  Worker graphed(rec, config("sgd", 0.0));
  graphed.step.set_compute_graphs(true);
  graphed.step.set_graphs(false);  // graphs off altogether
  BOOST_TEST(!graphed.step.compute_graphs());
  const Batch b(rec, 6, 3);
  for (int t = 0; t < 4; ++t) graphed.step.compute(b.x, b.labels.data(), context(t));
  BOOST_TEST(graphed.step.graph_counts().replayed == 0);
  BOOST_TEST(rec.graphs_held() == 0u);
  // Batch norm: not capturable.
  ModelSpec bn = tiny_mlp();
  bn.layers.insert(bn.layers.begin() + 1, {"batchnorm", {}, "test:bn"});
  Model bn_model(rec, bn, 1);
  const std::unique_ptr<Optimizer> bn_opt = make_optimizer(rec, bn_model, config("sgd", 0.0));
  TrainStep bn_step(bn_model, *bn_opt);
  bn_step.set_compute_graphs(true);
  BOOST_TEST(!bn_step.compute_graphs());
  BOOST_TEST(bn_step.compute_graphs_asked());
  // A capturable model, but passes that are not a plain training pass, or empty, run
  // op by op: nothing is captured however often they recur.
  Worker w(rec, config("sgd", 0.0));
  w.step.set_compute_graphs(true);
  BOOST_TEST_REQUIRE(w.step.compute_graphs());
  const Tensor empty(rec, {0, 7});
  for (int t = 0; t < 4; ++t) {
    StepContext not_training = context(t);
    not_training.training = false;
    w.step.compute(b.x, b.labels.data(), not_training);
    w.step.compute(empty, nullptr, context(t));
  }
  BOOST_TEST(w.step.graph_counts().captured == 0);
  BOOST_TEST(rec.graphs_held() == 0u);
}

BOOST_AUTO_TEST_CASE(a_model_without_dropout_replays_at_any_position) {
  // A policy that moves other workers' batches moves this worker's first position
  // while its own batch stays: a model whose pass does not read the position (no
  // dropout) replays the one graph; one with dropout, whose masks are keyed by it,
  // captures a graph per position. Bit for bit the uncaptured compute either way.
  for (double dropout : {0.0, 0.3}) {
    test::RecordingDevice rec;
    Worker graphed(rec, config("sgd", 0.0), 1, dropout), plain(cpu_device(), config("sgd", 0.0), 1, dropout);
    graphed.step.set_compute_graphs(true);
    BOOST_TEST(graphed.model.reads_sample_position() == (dropout > 0.0));
    const Batch g(rec, 8, 4), p(cpu_device(), 8, 4);
    for (int t = 0; t < 10; ++t) {
      StepContext ctx = context(t);
      ctx.first_sample = t % 2 ? 16 : 0;
      const LossResult a = graphed.step.compute(g.x, g.labels.data(), ctx);
      const LossResult b = plain.step.compute(p.x, p.labels.data(), ctx);
      BOOST_TEST(a.loss_sum == b.loss_sum, "dropout " << dropout << " step " << t);
      graphed.step.update(24, lr_at(t));
      plain.step.update(24, lr_at(t));
      check_same(graphed, plain, "dropout " + std::to_string(dropout) + " step " + std::to_string(t));
    }
    BOOST_TEST(graphed.step.graph_counts().captured == (dropout > 0.0 ? 2 : 1), "dropout " << dropout);
  }
}

BOOST_AUTO_TEST_CASE(graphs_outlive_evaluations_after_the_first) {
  // An evaluation at a larger batch grows the model's buffers once (the graphs are
  // dropped and recaptured); the Evaluator keeps its own buffers, so the next
  // evaluations allocate nothing and the training step replays straight after them.
  // An evaluation with buffers of its own each time (evaluate_range) drops them again.
  test::RecordingDevice rec;
  Worker w(rec, config("sgd", 0.0));
  const auto test_set = make_synthetic({7}, 3, 40, 5);
  DeviceInput input(rec, *test_set);
  Evaluator evaluator;
  const Batch b(rec, 8, 6);
  int t = 0;
  const auto train = [&](int steps) {
    bool replayed = false;
    for (int i = 0; i < steps; ++i, ++t) replayed = w.step.fused(b.x, b.labels.data(), context(t), lr_at(t)).replayed;
    return replayed;
  };
  BOOST_TEST(train(4));
  const EvalSums first = evaluator.run(w.model, input, 16, 0, 40);
  BOOST_TEST(first.count == 40.0);
  BOOST_TEST(!train(1));  // the buffers grew: dropped, op by op again
  BOOST_TEST(w.step.graph_counts().invalidated == 1);
  BOOST_TEST(train(3));
  for (int round = 0; round < 3; ++round) {
    evaluator.run(w.model, input, 16, 0, 40);
    BOOST_TEST(train(1), "round " << round);  // replayed at once
  }
  BOOST_TEST(w.step.graph_counts().invalidated == 1);
  evaluate_range(w.model, input, 16, 0, 40);
  BOOST_TEST(!train(1));
  BOOST_TEST(w.step.graph_counts().invalidated == 2);
}

BOOST_AUTO_TEST_SUITE_END()  // test_fused_step
