// Times training steps of one worker on one thread, exactly as the trainer runs them
// (global sampler -> gather -> forward/backward -> SGD), for an experiment file and
// batch size; prints one JSON line. tools/bench/mlp_vs_torch.py runs it side by side
// with PyTorch. With --peak it also times a large SGEMM: the practical single-core
// FLOP/s ceiling the step is compared against.
//
// usage: tandem_step_bench EXPERIMENT.lua --batch N [--steps N] [--warmup N] [--peak]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/step.hpp"
#include "kernels/cpu/gemm.hpp"

using namespace tandem;

namespace {

double sgemm_peak_flops() {
  const int n = 1536;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  cpu::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const Stopwatch sw;
    cpu::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::max(best, 2.0 * n * n * n / (sw.elapsed_ms() / 1000.0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    log::init(0, "warn");
    std::string experiment;
    int64_t batch = 64, steps = 300, warmup = 30;
    bool peak = false;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) TANDEM_FAIL("option ", a, " needs a value");
        return argv[++i];
      };
      if (a == "--batch") batch = std::stoll(next());
      else if (a == "--steps") steps = std::stoll(next());
      else if (a == "--warmup") warmup = std::stoll(next());
      else if (a == "--peak") peak = true;
      else experiment = a;
    }
    TANDEM_CHECK_HINT(!experiment.empty(), "usage: tandem_step_bench EXPERIMENT.lua --batch N", "no experiment given");
    ExperimentConfig cfg = load_experiment(experiment, {"global_batch=" + std::to_string(batch)});
    cpu::set_blas_threads(1);
    auto data = make_dataset(cfg.data, true);
    GlobalSampler sampler(data->size(), batch, cfg.seed);
    Device& dev = cpu_device();
    Model model(dev, cfg.model, cfg.seed);
    Sgd sgd(dev, model.param_count(), cfg.optimizer);
    TrainStep step(model, sgd);
    BatchLoader loader(*data, sampler, dev);
    StepContext ctx;
    double timed_ms = 0.0, loss = 0.0;
    for (int64_t t = 0; t < warmup + steps; ++t) {
      const Stopwatch sw;
      const Tensor& x = loader.load(t, 0, batch);
      loss = step.run(x, loader.labels(), batch, cfg.optimizer.lr, ctx).loss_sum / static_cast<double>(batch);
      if (t >= warmup) timed_ms += sw.elapsed_ms();
    }
    const double samples_per_s = static_cast<double>(steps * batch) / (timed_ms / 1000.0);
    // the FLOPs the step really executes (see Model::train_flops_per_sample)
    const double step_flops = model.train_flops_per_sample() * static_cast<double>(batch);
    const double flops = step_flops * static_cast<double>(steps) / (timed_ms / 1000.0);
    std::printf("{\"engine\":\"tandem\",\"batch\":%lld,\"steps\":%lld,\"samples_per_s\":%.1f,\"ms_per_step\":%.4f,"
                "\"flops\":%.4g,\"final_loss\":%.4f",
                static_cast<long long>(batch), static_cast<long long>(steps), samples_per_s,
                timed_ms / static_cast<double>(steps), flops, loss);
    if (peak) std::printf(",\"sgemm_peak_flops\":%.4g", sgemm_peak_flops());
    std::printf("}\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem_step_bench: %s\n", e.what());
    return 1;
  }
}
