#include "engine/train/trainer.hpp"

#include <atomic>
#include <cmath>
#include <csignal>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/nn/lr_schedule.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/evaluate.hpp"
#include "engine/train/run_dir.hpp"
#include "engine/train/step.hpp"
#include "engine/train/trace.hpp"
#include "kernels/cpu/gemm.hpp"

namespace tandem {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

// Ctrl-C ends the run at the next iteration boundary with a summary written;
// a second Ctrl-C kills it as usual.
struct InterruptGuard {
  InterruptGuard() {
    g_interrupted = false;
    std::signal(SIGINT, on_sigint);
  }
  ~InterruptGuard() { std::signal(SIGINT, SIG_DFL); }
};

std::string summary_json(const RunSummary& s, const ExperimentConfig& cfg) {
  nlohmann::json j;
  j["experiment"] = cfg.name;
  j["stop_reason"] = s.stop_reason;
  j["iterations"] = s.iterations;
  j["epochs"] = s.epochs;
  j["global_batch"] = cfg.global_batch;
  j["parameters"] = s.parameters;
  j["final_loss"] = s.final_loss;
  j["test_accuracy"] = s.test_accuracy;
  j["best_test_accuracy"] = s.best_test_accuracy;
  j["target_accuracy"] = cfg.stop.target_accuracy ? nlohmann::json(*cfg.stop.target_accuracy) : nlohmann::json();
  j["samples_per_s"] = s.samples_per_s;
  j["train_s"] = s.train_s;
  j["wall_s"] = s.wall_s;
  j["time_to_target_s"] = s.time_to_target_s ? nlohmann::json(*s.time_to_target_s) : nlohmann::json();
  return j.dump(2) + "\n";
}

}  // namespace

RunSummary train(const ExperimentConfig& cfg) {
  const Stopwatch wall;
  InterruptGuard interrupt_guard;
  RunSummary summary;
  cpu::set_blas_threads(cfg.blas_threads);
  Device& dev = cpu_device();

  auto train_set = make_dataset(cfg.data, /*train=*/true);
  auto test_set = make_dataset(cfg.data, /*train=*/false);
  TANDEM_CHECK_HINT(train_set->sample_shape() == cfg.model.input && train_set->classes() == cfg.model.classes,
                    "the model must be built for the data set's input shape and classes", "model input ",
                    shape_str(cfg.model.input), " with ", cfg.model.classes, " classes does not match data set '",
                    train_set->name(), "' (", shape_str(train_set->sample_shape()), ", ", train_set->classes(),
                    " classes)");
  GlobalSampler sampler(train_set->size(), cfg.global_batch, cfg.seed);
  const int64_t per_epoch = sampler.iterations_per_epoch();
  int64_t total = static_cast<int64_t>(std::ceil(cfg.stop.epochs * static_cast<double>(per_epoch)));
  if (cfg.stop.max_iterations) total = std::min(total, *cfg.stop.max_iterations);
  const int64_t eval_every = cfg.eval_every > 0 ? cfg.eval_every : per_epoch;

  Model model(dev, cfg.model, cfg.seed);
  Sgd sgd(dev, model.param_count(), cfg.optimizer);
  LrSchedule schedule(cfg.schedule, cfg.optimizer.lr, per_epoch, total);
  TrainStep step(model, sgd);
  summary.parameters = static_cast<int64_t>(model.param_count());
  // The run directory is made only once data and model have loaded, so a mistake
  // there leaves no empty run behind.
  summary.run_dir = make_run_dir(cfg.out_dir, cfg.name);
  log::add_file(summary.run_dir + "/log.txt");
  write_text_file(summary.run_dir + "/config.json", cfg.resolved_json.empty() ? "{}\n" : cfg.resolved_json + "\n");
  spdlog::info("run directory {}", summary.run_dir);

  spdlog::info("{}", model.summary());
  spdlog::info("data {}: {} train / {} test samples; global batch {}, {} iterations per epoch, {} iterations",
               train_set->name(), train_set->size(), test_set->size(), cfg.global_batch, per_epoch, total);

  TraceWriter trace(summary.run_dir + "/trace.jsonl");
  const int64_t B = cfg.global_batch;
  BatchLoader loader(*train_set, sampler, dev);
  StepContext ctx;

  double train_ms = 0.0, window_loss = 0.0, window_ms = 0.0;
  int64_t window_samples = 0, window_correct = 0, samples_done = 0;
  summary.stop_reason = "epochs";
  int64_t t = 0;
  for (; t < total; ++t) {
    const Stopwatch step_clock;
    const Tensor& x = loader.load(t, 0, B);
    const double data_ms = step_clock.elapsed_ms();

    ctx.training = true;
    ctx.seed = mix_seed(cfg.seed, static_cast<uint64_t>(t));
    ctx.first_sample = 0;
    const double lr = schedule.at(t);
    StepTimes times;
    const LossResult lr_res = step.run(x, loader.labels(), B, lr, ctx, &times);
    const double step_ms = step_clock.elapsed_ms();
    train_ms += step_ms;
    window_ms += step_ms;
    samples_done += B;

    if (!std::isfinite(lr_res.loss_sum))
      TANDEM_FAIL_HINT("lower the learning rate (lr=...) or add warm-up (schedule.warmup_iterations=...)",
                       "training loss became ", lr_res.loss_sum, " at iteration ", t);

    IterationRecord rec;
    rec.iteration = t;
    rec.epoch = sampler.epoch_of(t);
    rec.global_batch = B;
    rec.lr = lr;
    rec.loss = lr_res.loss_sum / static_cast<double>(B);
    rec.correct = lr_res.correct;
    rec.data_ms = data_ms;
    rec.compute_ms = times.compute_ms;
    rec.optimizer_ms = times.optimizer_ms;
    rec.step_ms = step_ms;
    rec.wall_s = wall.elapsed_ms() / 1000.0;
    trace.write(rec);

    window_loss += lr_res.loss_sum;
    window_samples += B;
    window_correct += lr_res.correct;
    const bool last = t + 1 == total;
    if ((t + 1) % cfg.log_every == 0 || last) {
      summary.final_loss = window_loss / static_cast<double>(window_samples);
      spdlog::info("epoch {:>3} iter {:>7}/{} loss {:.4f} train acc {:.3f} lr {:.4g} {:.0f} samples/s",
                   sampler.epoch_of(t) + 1, t + 1, total, summary.final_loss,
                   static_cast<double>(window_correct) / static_cast<double>(window_samples), lr,
                   static_cast<double>(window_samples) / (window_ms / 1000.0));
      window_loss = 0.0;
      window_samples = window_correct = 0;
      window_ms = 0.0;
    }

    if ((t + 1) % eval_every == 0 || last) {
      const Stopwatch eval_clock;
      const EvalResult ev = evaluate(model, *test_set, cfg.eval_batch);
      EvalRecord er{t + 1, static_cast<double>(t + 1) / static_cast<double>(per_epoch), ev.loss, ev.accuracy,
                    eval_clock.elapsed_ms(), train_ms / 1000.0};
      trace.write(er);
      trace.flush();
      summary.test_accuracy = ev.accuracy;
      summary.best_test_accuracy = std::max(summary.best_test_accuracy, ev.accuracy);
      spdlog::info("epoch {:.2f} iter {} test loss {:.4f} test accuracy {:.4f} (eval {:.0f} ms)", er.epoch, t + 1,
                   ev.loss, ev.accuracy, er.eval_ms);
      if (cfg.stop.target_accuracy && ev.accuracy >= *cfg.stop.target_accuracy) {
        if (!summary.time_to_target_s) summary.time_to_target_s = train_ms / 1000.0;
        summary.stop_reason = "target_accuracy";
        ++t;
        break;
      }
    }
    if (cfg.stop.max_seconds && train_ms / 1000.0 >= *cfg.stop.max_seconds) {
      summary.stop_reason = "max_seconds";
      ++t;
      break;
    }
    if (g_interrupted) {
      spdlog::warn("interrupted: stopping after iteration {}", t + 1);
      summary.stop_reason = "interrupted";
      ++t;
      break;
    }
  }
  if (summary.stop_reason == "epochs" && cfg.stop.max_iterations && t == *cfg.stop.max_iterations &&
      t < static_cast<int64_t>(std::ceil(cfg.stop.epochs * static_cast<double>(per_epoch))))
    summary.stop_reason = "max_iterations";

  summary.iterations = t;
  summary.epochs = static_cast<double>(t) / static_cast<double>(per_epoch);
  summary.train_s = train_ms / 1000.0;
  summary.samples_per_s = train_ms > 0 ? static_cast<double>(samples_done) / summary.train_s : 0.0;
  summary.wall_s = wall.elapsed_ms() / 1000.0;
  write_text_file(summary.run_dir + "/summary.json", summary_json(summary, cfg));
  spdlog::info("done ({}): {} iterations, test accuracy {:.4f}, {:.0f} samples/s, {:.1f} s{}", summary.stop_reason,
               summary.iterations, summary.test_accuracy, summary.samples_per_s, summary.wall_s,
               summary.time_to_target_s ? fmt::format(", target reached after {:.1f} s of training",
                                                      *summary.time_to_target_s)
                                        : std::string());
  return summary;
}

}  // namespace tandem
