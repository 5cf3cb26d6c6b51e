// The golden end-to-end test (llm.c's test_gpt2): a small MLP on Fashion-MNIST with
// a fixed seed trains 10 steps through the same TrainStep the trainer uses; the
// loss of every step must match the recorded values. Any change to initialisation,
// sampling, data normalisation, a kernel or the optimizer shows up here as drift.
// The recorded values were produced by this engine and agree with PyTorch run from
// the same initial weights and batches (tools/golden/check_against_torch.py).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/train/step.hpp"
#include "kernels/cpu/gemm.hpp"

BOOST_AUTO_TEST_SUITE(test_golden)  // ctest's unit.test_golden (tests/CMakeLists.txt)

using namespace tandem;

namespace {

ModelSpec golden_mlp() {
  ModelSpec spec;
  spec.name = "golden-mlp";
  spec.input = {1, 28, 28};
  spec.classes = 10;
  spec.layers = {{"flatten", {}, "golden:1"},           {"linear", {{"out", 64}}, "golden:2"},
                 {"relu", {}, "golden:3"},              {"linear", {{"out", 32}}, "golden:4"},
                 {"relu", {}, "golden:5"},              {"linear", {{"out", 10}}, "golden:6"}};
  return spec;
}

}  // namespace

BOOST_AUTO_TEST_CASE(first_steps_match_recorded_losses) {
  // Recorded losses (mean over the batch) of steps 0..9.
  const std::vector<double> expected = {2.290116, 2.234009, 2.162685, 2.099195, 2.050145,
                                        1.918279, 1.600312, 1.450865, 1.288292, 1.529417};
  cpu::set_blas_threads(1);
  DataConfig data;
  auto train = make_dataset(data, true);
  const int64_t B = 32;
  GlobalSampler sampler(train->size(), B, 1234);
  Model model(cpu_device(), golden_mlp(), 1234);
  OptimizerConfig opt;
  opt.lr = 0.1;
  opt.momentum = 0.9;
  opt.weight_decay = 1e-3;
  Sgd sgd(cpu_device(), model.param_count(), opt);
  TrainStep step(model, sgd);
  BatchLoader loader(*train, sampler, cpu_device());
  std::vector<double> got;
  // TANDEM_GOLDEN_DUMP=DIR writes the initial parameters and each step's sample
  // indices, so tools/golden/check_against_torch.py can replay the run in PyTorch.
  const char* dump_dir = std::getenv("TANDEM_GOLDEN_DUMP");
  std::FILE* dump_indices = nullptr;
  if (dump_dir) {
    const std::string dir = dump_dir;
    std::FILE* f = std::fopen((dir + "/params.f32").c_str(), "wb");
    BOOST_REQUIRE(f);
    std::fwrite(model.params().data(), sizeof(float), model.param_count(), f);
    std::fclose(f);
    dump_indices = std::fopen((dir + "/indices.txt").c_str(), "w");
    BOOST_REQUIRE(dump_indices);
  }
  for (int64_t t = 0; t < static_cast<int64_t>(expected.size()); ++t) {
    const Tensor& x = loader.load(t, 0, B);
    if (dump_indices)
      for (int64_t i = 0; i < B; ++i)
        std::fprintf(dump_indices, "%lld%c", static_cast<long long>(loader.indices()[i]), i + 1 < B ? ' ' : '\n');
    StepContext ctx;
    ctx.seed = mix_seed(1234, static_cast<uint64_t>(t));
    got.push_back(step.run(x, loader.labels(), B, opt.lr, ctx).loss_sum / B);
  }
  if (dump_indices) std::fclose(dump_indices);
  for (size_t i = 0; i < got.size(); ++i) std::printf("%s%.6f", i ? ", " : "", got[i]);
  std::printf("\n");
  for (size_t i = 0; i < expected.size(); ++i)
    BOOST_TEST(std::abs(got[i] - expected[i]) < 1e-4 * std::max(1.0, std::abs(expected[i])),
               "step " << i << ": loss " << got[i] << " drifted from the recorded " << expected[i]);
}

BOOST_AUTO_TEST_SUITE_END()  // test_golden
