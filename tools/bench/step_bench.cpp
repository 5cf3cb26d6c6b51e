// Times training steps of one worker, exactly as the trainer runs them (global
// sampler -> gather -> forward/backward -> SGD, the next batch prefetched while the
// update runs; the fused step where fused_step takes it), for an experiment file,
// batch size and device; prints one JSON line.
// tools/bench/mlp_vs_torch.py (one CPU core) and gpu_vs_torch.py (one GPU) run it
// side by side with PyTorch. With --peak it also times a large GEMM on the same
// device in each precision (fp32, tf32, bf16: engine/core/precision.hpp): the
// practical FLOP/s ceilings the step is compared against.
//
// usage: tandem_step_bench EXPERIMENT.lua --batch N [--steps N] [--warmup N] [--peak]
//                          [--device cpu|cuda] [--precision fp32|tf32|bf16] [--tf32]
//                          [--set KEY=VALUE ...]   (more experiment overrides)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/core/cuda_device.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/device_choice.hpp"
#include "engine/train/step.hpp"
#include "kernels/cpu/gemm.hpp"

using namespace tandem;

namespace {

// The best of a few large square GEMMs on the device (1536 on a CPU core, 8192 on a GPU).
double gemm_peak_flops(Device& dev) {
  const int n = dev.kind() == DeviceKind::cpu ? 1536 : 8192;
  Tensor a(dev, {n, n}), b(dev, {n, n}), c(dev, {n, n});
  a.fill(0.5f);
  b.fill(0.25f);
  auto once = [&] { dev.gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); };
  once();  // warm-up
  dev.synchronize();
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const Stopwatch sw;
    once();
    dev.synchronize();
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
    std::string precision = "fp32";
    std::vector<std::string> sets;
    std::string device = "cpu";
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
      else if (a == "--device") device = next();
      else if (a == "--precision") precision = next();
      else if (a == "--tf32") precision = "tf32";
      else if (a == "--set") sets.push_back(next());
      else experiment = a;
    }
    TANDEM_CHECK_HINT(!experiment.empty(), "usage: tandem_step_bench EXPERIMENT.lua --batch N", "no experiment given");
    sets.insert(sets.begin(), {"global_batch=" + std::to_string(batch), "device=" + device, "precision=" + precision});
    ExperimentConfig cfg = load_experiment(experiment, sets);
    cpu::set_blas_threads(1);
    auto data = make_dataset(cfg.data, true);
    GlobalSampler sampler(data->size(), batch, cfg.seed);
    DeviceChoice chosen = choose_device(cfg.device, 0);
    Device& dev = *chosen.device;
    Model model(dev, cfg.model, cfg.seed);
    const auto optimizer = make_optimizer(dev, model, cfg.optimizer);
    TrainStep step(model, *optimizer, cfg.accumulate);
    BatchLoader loader(*data, sampler, dev, cfg.data.on_device);
    StepContext ctx;
    // The step the trainer takes for one worker (engine/train/sync/bsp_step.cpp): the
    // fused step where fused_step allows it (on a GPU by default, captured in CUDA
    // graphs where the model allows) unless batch norm needs the host mid-step.
    const bool fused = model.layer_state().empty() &&
                       (cfg.fused_step == "always" || (cfg.fused_step == "auto" && dev.kind() != DeviceKind::cpu));
    // Op by op, the compute replays a graph where the device and the model allow,
    // unless fused_step = 'never' (the plain reference), as the trainer's.
    if (!fused && cfg.fused_step != "never") step.set_compute_graphs(true);
    double timed_ms = 0.0, loss = 0.0;
    for (int64_t t = 0; t < warmup + steps; ++t) {
      const Stopwatch sw;
      const Tensor& x = loader.load(t, 0, batch);
      LossResult r;
      if (fused) {
        // As the trainer: step t queued, the next batch's gather behind it, then step
        // t - 1 read (the last step read at the end, inside the timed window).
        step.fused_queue(x, loader.labels(), ctx, cfg.optimizer.lr);
        if (t + 1 < warmup + steps) loader.prefetch(t + 1, 0, batch);
        while (step.unread() > (t + 1 < warmup + steps ? 1 : 0)) r = step.fused_finish().loss;
      } else {
        r = step.compute(x, loader.labels(), ctx);
        // As the trainer: the update only when the loss and the gradient are finite
        // (the gradient's squared norm, read back; clipping reuses it).
        const double grad_sq = dev.sum_squares(model.grads().data(), model.param_count());
        if (std::isfinite(r.loss_sum) && std::isfinite(grad_sq)) step.update(batch, cfg.optimizer.lr, grad_sq);
      }
      if (!fused && t + 1 < warmup + steps) loader.prefetch(t + 1, 0, batch);
      loss = r.loss_sum / static_cast<double>(batch);
      if (t + 1 == warmup + steps) dev.synchronize();  // the last update is part of the time
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
    std::printf(",\"device\":\"%s\"", dev.name().c_str());
    std::printf(",\"precision\":\"%s\"", precision.c_str());
    const GraphCounts& g = step.graph_counts();
    std::printf(",\"fused\":%s,\"graph_replays\":%lld,\"graphs_captured\":%lld", fused ? "true" : "false",
                static_cast<long long>(g.replayed), static_cast<long long>(g.captured));
    if (peak) {
      // The same device in each precision (a CUDA device of its own for each).
      std::printf(",\"gemm_peak_flops\":{");
      const char* sep = "";
      for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16}) {
        std::unique_ptr<Device> owned;
        if (dev.kind() != DeviceKind::cpu) {
          CudaOptions o;
          o.ordinal = cuda_ordinal_of(dev);
          o.precision = p;
          owned = make_cuda_device(o);
        }
        std::printf("%s\"%s\":%.4g", sep, precision_name(p), gemm_peak_flops(owned ? *owned : cpu_device(p)));
        sep = ",";
      }
      std::printf("}");
    }
    std::printf("}\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem_step_bench: %s\n", e.what());
    return 1;
  }
}
