// The golden test of the language model (llm.c's test_gpt2): a tiny GPT on the
// fortunes corpus (byte tokens) trains 10 steps with AdamW (decoupled weight decay on
// its matrices and embeddings only) and gradient clipping, through the same TrainStep
// the trainer uses; every step's loss (mean per token) must match the recorded value.
// Any change to the layers' initialisation or arithmetic, the text windows, the
// parameter groups, AdamW or clipping shows up here as drift. The recorded values
// were produced by this engine and agree with PyTorch replaying the same initial
// weights and batches (tools/golden/check_gpt_against_torch.py, to 1e-4).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/optimizer.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/step.hpp"
#include "kernels/cpu/gemm.hpp"

BOOST_AUTO_TEST_SUITE(test_golden_gpt)  // ctest's unit.test_golden_gpt (tests/CMakeLists.txt)

using namespace tandem;

namespace {

constexpr int kSeq = 16, kEmbd = 32, kHeads = 2, kLayers = 2, kBatch = 8;

ModelSpec golden_gpt() {
  ModelSpec spec;
  spec.name = "golden-gpt";
  spec.input = {kSeq};
  spec.classes = 256;
  spec.layers = {{"embedding", {{"n_embd", kEmbd}, {"seq_len", kSeq}}, "golden:1"}};
  for (int l = 0; l < kLayers; ++l)
    spec.layers.push_back({"transformer_block", {{"n_head", kHeads}, {"n_layer", kLayers}}, "golden:2"});
  spec.layers.push_back({"layernorm", {}, "golden:3"});
  spec.layers.push_back({"lm_head", {{"tied", 1}}, "golden:4"});
  return spec;
}

}  // namespace

BOOST_AUTO_TEST_CASE(first_steps_match_recorded_losses) {
  // Recorded losses (mean per token) of steps 0..9.
  const std::vector<double> expected = {5.571630, 5.441571, 5.322762, 5.201704, 5.116365,
                                        4.981991, 4.860744, 4.875200, 4.696478, 4.600199};
  DataConfig data;
  data.name = "text";
  data.seq_len = kSeq;
  if (!std::filesystem::exists(data.files[0])) {
    // make test installs it (tools/install-deps.sh); say so rather than pass silently.
    BOOST_FAIL("the fortunes corpus is not installed at " << data.files[0] << ": apt-get install fortunes");
  }
  cpu::set_blas_threads(1);
  auto train = make_dataset(data, true);
  GlobalSampler sampler(train->size(), kBatch, 1234);
  Model model(cpu_device(), golden_gpt(), 1234);
  OptimizerConfig opt;
  opt.name = "adamw";
  opt.lr = 3e-3;
  opt.beta1 = 0.9;
  opt.beta2 = 0.95;
  opt.eps = 1e-8;
  opt.weight_decay = 0.1;
  opt.clip_grad_norm = 0.5;
  const auto optimizer = make_optimizer(cpu_device(), model, opt);
  TrainStep step(model, *optimizer);
  BatchLoader loader(*train, sampler, cpu_device());
  std::vector<double> got;
  int clipped = 0;
  // TANDEM_GOLDEN_DUMP=DIR writes the model's size, the initial parameters and each
  // step's batch, so tools/golden/check_gpt_against_torch.py can replay the run.
  const char* dump_dir = std::getenv("TANDEM_GOLDEN_DUMP");
  std::FILE* dump_batches = nullptr;
  if (dump_dir) {
    const std::string dir = dump_dir;
    std::FILE* f = std::fopen((dir + "/params.f32").c_str(), "wb");
    BOOST_REQUIRE(f);
    std::fwrite(model.params().data(), sizeof(float), model.param_count(), f);
    std::fclose(f);
    f = std::fopen((dir + "/config.txt").c_str(), "w");
    BOOST_REQUIRE(f);
    std::fprintf(f, "vocab 256\nseq_len %d\nn_embd %d\nn_head %d\nn_layer %d\nbatch %d\nlr %.17g\nweight_decay %.17g\n"
                 "clip_grad_norm %.17g\nbeta1 %.17g\nbeta2 %.17g\neps %.17g\n", kSeq, kEmbd, kHeads, kLayers, kBatch,
                 opt.lr, opt.weight_decay, opt.clip_grad_norm, opt.beta1, opt.beta2, opt.eps);
    std::fclose(f);
    dump_batches = std::fopen((dir + "/batches.txt").c_str(), "w");
    BOOST_REQUIRE(dump_batches);
  }
  for (int64_t t = 0; t < static_cast<int64_t>(expected.size()); ++t) {
    const Tensor& x = loader.load(t, 0, kBatch);
    if (dump_batches) {
      const std::vector<float> tokens = x.to_host();
      for (size_t i = 0; i < tokens.size(); ++i)
        std::fprintf(dump_batches, "%d%c", static_cast<int>(tokens[i]), i + 1 < tokens.size() ? ' ' : '\n');
      for (int i = 0; i < kBatch * kSeq; ++i)
        std::fprintf(dump_batches, "%d%c", loader.labels()[i], i + 1 < kBatch * kSeq ? ' ' : '\n');
    }
    StepContext ctx;
    ctx.seed = mix_seed(1234, static_cast<uint64_t>(t));
    got.push_back(step.run(x, loader.labels(), kBatch, opt.lr, ctx).loss_sum / (kBatch * kSeq));
    if (step.last_grad_norm() > opt.clip_grad_norm) ++clipped;
  }
  if (dump_batches) std::fclose(dump_batches);
  for (size_t i = 0; i < got.size(); ++i) std::printf("%s%.6f", i ? ", " : "", got[i]);
  std::printf("\n");
  // The run exercises what it claims to: clipping acted, and the model learned.
  BOOST_TEST(clipped > 0);
  BOOST_TEST(got.back() < got.front() - 0.3);
  for (size_t i = 0; i < expected.size(); ++i)
    BOOST_TEST(std::abs(got[i] - expected[i]) < 1e-4 * std::max(1.0, std::abs(expected[i])),
               "step " << i << ": loss " << got[i] << " drifted from the recorded " << expected[i]);
}

BOOST_AUTO_TEST_SUITE_END()  // test_golden_gpt
