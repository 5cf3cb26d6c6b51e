#include "engine/train/step.hpp"

#include <algorithm>
#include <exception>
#include <limits>

#include "engine/core/log.hpp"

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "kernels/dropout_seed.hpp"

namespace tandem {

TrainStep::TrainStep(Model& model, Optimizer& optimizer, int64_t accumulate)
    : model_(model), optimizer_(optimizer), accumulate_(accumulate), positional_(model.reads_sample_position()) {
  TANDEM_CHECK_HINT(accumulate >= 1, "set accumulate to 1 or more", "accumulate = ", accumulate);
}

void TrainStep::set_micro_batches(int64_t k) {
  TANDEM_CHECK_HINT(k >= 1, "give a plan's micro_batches 1 or more", "micro-batches = ", k);
  accumulate_ = k;
}

TrainStep::~TrainStep() { drop_graphs(); }

void TrainStep::pass(const Tensor& x, const int32_t* labels, const StepContext& ctx, bool accumulate) {
  loss_.forward(model_.forward(x, ctx), labels, /*with_grad=*/true, totals_, accumulate, model_.classes());
  model_.backward(loss_.grad(), ctx);
}

void TrainStep::queue_compute(const Tensor& x, const int32_t* labels, const StepContext& ctx) {
  const int64_t n = x.rank() > 0 ? x.dim(0) : 0;
  const int64_t parts = passes(n);
  if (parts == 1) {
    pass(x, labels, ctx, false);
    return;
  }
  Device& dev = model_.device();
  const int64_t per_sample = x.numel() / n, targets = model_.targets_per_sample();
  Shape shape = x.shape();
  for (int64_t k = 0; k < parts; ++k) {
    const int64_t begin = n * k / parts, end = n * (k + 1) / parts;
    shape[0] = end - begin;
    const Tensor micro = Tensor::view_of(dev, x.data() + begin * per_sample, shape);
    StepContext c = ctx;
    c.first_sample = ctx.first_sample + begin;
    // The first part's backward overwrites the gradients, the others add to them
    // (layer.hpp): the sum builds in place. The loss sums on the device.
    c.accumulate_grads = k > 0;
    if (k + 1 < parts) c.grads_ready = nullptr;  // the sums are final in the last pass only
    pass(micro, labels + begin * targets, c, /*accumulate=*/k > 0);
  }
}

LossResult TrainStep::compute(const Tensor& x, const int32_t* labels, const StepContext& ctx) {
  // A training pass only (evaluation and batch norm's calibration pass differ in
  // what they compute, which the key does not hold), of at least one sample.
  if (compute_graphs() && ctx.training && ctx.update_running_stats && !ctx.reducer && x.rank() > 0 && x.dim(0) > 0) {
    // The iteration's seed goes to device memory, where dropout reads it (the graph
    // keeps a pointer, not the value); the rest of the part depends on the input only.
    Device& dev = model_.device();
    double seed[2];
    seed_to_halves(ctx.seed, seed);
    scalars_.write(dev, kStepSeedHigh, seed, 2);
    StepContext c = ctx;
    c.seed_on_device = scalars_.on(dev) + kStepSeedHigh;
    run_graphed(false, x, labels, c, [&] { queue_compute(x, labels, c); });
  } else {
    queue_compute(x, labels, ctx);
  }
  // Reading the totals waits for everything queued: the gradients are complete when
  // this returns, the caller times the compute and hands the buffer to the
  // all-reduce. It is the step's one wait, after the whole backward pass is queued
  // (not between forward and backward, where a GPU would idle while the host queued).
  return totals_.read();
}

void TrainStep::update(int64_t global_batch, double lr, std::optional<double> grad_sq) {
  const double predictions = static_cast<double>(global_batch) * static_cast<double>(model_.targets_per_sample());
  const double max_norm = optimizer_.config().clip_grad_norm;
  // The gradient buffer is the all-reduced sum here: every rank, whatever its share,
  // computes the same norm and clips the same.
  if (max_norm > 0.0 && !grad_sq)
    grad_sq = model_.device().sum_squares(model_.grads().data(), model_.param_count());
  const double scale =
      gradient_scale(grad_sq.value_or(0.0), predictions, max_norm, max_norm > 0.0 ? &grad_norm_ : nullptr);
  optimizer_.step(model_.params(), model_.grads(), lr, scale);
}

LossResult TrainStep::run(const Tensor& x, const int32_t* labels, int64_t global_batch, double lr,
                          const StepContext& ctx, StepTimes* times) {
  const double t0 = times ? now_ms() : 0.0;
  const LossResult r = compute(x, labels, ctx);
  const double t1 = times ? now_ms() : 0.0;
  update(global_batch, lr);
  if (times) {
    times->compute_ms = t1 - t0;
    times->optimizer_ms = now_ms() - t1;
  }
  return r;
}

// ---- The fused step.

void TrainStep::set_graphs(bool on) {
  graphs_on_ = on;
  if (!on) drop_graphs();
}

void TrainStep::set_compute_graphs(bool on) { compute_graphs_ = on; }

bool TrainStep::graphs() const { return graphs_on_ && model_.device().can_capture() && model_.capturable(); }

void TrainStep::queue_fused(const Tensor& x, const int32_t* labels, const StepContext& ctx, bool poison) {
  Device& dev = model_.device();
  double* s = scalars_.on(dev);
  queue_compute(x, labels, ctx);
  if (poison) dev.fill(model_.grads().data(), 1, std::numeric_limits<float>::quiet_NaN());
  dev.sum_squares_into(model_.grads().data(), model_.param_count(), s + kStepGradSq);
  dev.decide_step(s, totals_.on(dev), optimizer_.rule());
  optimizer_.apply(model_.params(), model_.grads(), s);
}

FusedResult TrainStep::fused(const Tensor& x, const int32_t* labels, const StepContext& ctx, double lr, bool poison) {
  TANDEM_CHECK(pending_.empty(), "fused() with ", pending_.size(),
               " step(s) unread: it would return the oldest (a bug in tandem: use fused_finish)");
  fused_queue(x, labels, ctx, lr, poison);
  return fused_finish();
}

void TrainStep::fused_queue(const Tensor& x, const int32_t* labels, const StepContext& ctx, double lr, bool poison) {
  TANDEM_CHECK(pending_.size() <= 1, "a fused step queued with ", pending_.size(),
               " unread before it (a bug in tandem: at most one may be)");
  // The step before's results are copied out now, before this step overwrites them,
  // and after whatever the caller queued in between (the next batch's gather): so
  // the read waits for that too, which the input's staging ring counts on
  // (device_input.hpp: a wait between fill n and fill n + 2).
  ask_results();
  Device& dev = model_.device();
  const int64_t n = x.rank() > 0 ? x.dim(0) : 0;
  TANDEM_CHECK_HINT(n > 0, "run the step with at least one sample", "a fused step over an empty batch");
  // What the host knows before the step, written ahead of it in the device's order:
  // the update's scalars, the iteration's seed (dropout reads it there), and the bias
  // corrections for both outcomes of an unread step before this one.
  double known[kStepHostSlots] = {};
  known[kStepLr] = lr;
  known[kStepPredictions] = static_cast<double>(n) * static_cast<double>(model_.targets_per_sample());
  seed_to_halves(ctx.seed, &known[kStepSeedHigh]);  // kStepSeedHigh, then kStepSeedLow
  const int64_t taken = optimizer_.steps();  // the updates read so far
  optimizer_.bias_corrections(taken + 1, &known[kStepBiasIfSkipped1], &known[kStepBiasIfSkipped2]);
  optimizer_.bias_corrections(taken + 2, &known[kStepBiasIfTaken1], &known[kStepBiasIfTaken2]);
  known[kStepPending] = pending_.empty() ? 0.0 : 1.0;
  scalars_.write(dev, kStepLr, known, kStepHostSlots);
  StepContext c = ctx;
  c.seed_on_device = scalars_.on(dev) + kStepSeedHigh;
  bool replayed = false;
  if (poison || !graphs()) {
    queue_fused(x, labels, c, poison);
    ++graph_counts_.eager;
  } else {
    replayed = run_graphed(true, x, labels, c, [&] { queue_fused(x, labels, c, false); });
  }
  pending_.push_back({-1, replayed});
}

void TrainStep::ask_results() {
  if (pending_.empty() || pending_.back().ticket >= 0) return;
  pending_.back().ticket = model_.device().read_doubles_later(scalars_.on(model_.device()) + kStepBias1,
                                                              kStepResultSlots);
}

FusedResult TrainStep::fused_finish() {
  TANDEM_CHECK(!pending_.empty(), "a fused step read with none queued (a bug in tandem)");
  if (pending_.front().ticket < 0) ask_results();  // the newest step, read at once
  const Pending p = pending_.front();
  pending_.pop_front();
  double v[kStepSlots] = {};
  model_.device().collect(p.ticket, v + kStepBias1);
  FusedResult r;
  r.replayed = p.replayed;
  r.finite = v[kStepFinite] != 0.0;
  r.loss.loss_sum = v[kStepLoss];
  r.loss.correct = static_cast<int64_t>(v[kStepCorrect] + 0.5);
  r.grad_norm = v[kStepNorm];
  if (r.finite) optimizer_.set_steps(optimizer_.steps() + 1);
  if (r.finite && optimizer_.config().clip_grad_norm > 0.0) grad_norm_ = r.grad_norm;  // as update() keeps it
  return r;
}

template <typename Queue>
bool TrainStep::run_graphed(bool whole, const Tensor& x, const int32_t* labels, const StepContext& ctx,
                            Queue queue) {
  Device& dev = model_.device();
  const auto op_by_op = [&] {
    queue();
    ++graph_counts_.eager;
    return false;
  };
  // A graph holds raw pointers: once any device memory was allocated or freed (an
  // evaluation grew a buffer, a new batch size did), none of them can be trusted.
  if (live_graphs_ > 0 && dev.memory_epoch() != graph_epoch_) {
    drop_graphs();
    ++graph_counts_.invalidated;
  }
  const int64_t n = x.dim(0);
  // The position matters only to a model whose pass reads it (dropout's masks): one
  // without replays its graph wherever a plan puts this worker's samples.
  const GraphKey key{whole, x.data(), labels, n, x.numel() / n, positional_ ? ctx.first_sample : 0, accumulate_};
  if (const Graph& g = graphs_[key]; g.id >= 0) {
    dev.replay(g.id);
    ++graph_counts_.replayed;
    return true;
  } else if (!g.warm || g.refused) {
    // First sightings run op by op: they grow the buffers this input needs. One that
    // allocates nothing says the next sighting can be captured.
    const uint64_t before = dev.memory_epoch();
    op_by_op();
    graphs_[key].warm = dev.memory_epoch() == before;
    return false;
  }
  if (live_graphs_ >= kMaxGraphs) {  // many inputs (batch sizes): start over
    drop_graphs();
    ++graph_counts_.evicted;
  }
  Graph& g = graphs_[key];
  const uint64_t before = dev.memory_epoch();
  int id = -1;
  try {
    dev.begin_capture();
    queue();
    id = dev.end_capture();
  } catch (const std::exception& e) {
    // Nothing ran (a capture runs nothing): the step runs op by op. This input is not
    // tried again, and after a few such failures no input is.
    dev.abort_capture();
    g.refused = true;
    ++graph_counts_.failed;
    const bool give_up = ++capture_failures_ >= kMaxCaptureFailures;
    log::warn("the training step could not be captured in a graph on {} ({}): {}", dev.name(), e.what(),
                 give_up ? "it runs op by op from now on" : "this input runs op by op");
    if (give_up) set_graphs(false);  // drops every graph, g with them
    return op_by_op();
  }
  if (dev.memory_epoch() != before) {
    // The capture took memory (a pool block its ops now point into) that the next
    // free could hand to someone else: never replay it.
    dev.drop_graph(id);
    g.refused = true;
    return op_by_op();
  }
  // A capture runs nothing: the step runs as the graph's first replay.
  g.id = id;
  ++live_graphs_;
  graph_epoch_ = dev.memory_epoch();
  dev.replay(id);
  ++graph_counts_.captured;
  ++graph_counts_.replayed;
  return true;
}

void TrainStep::drop_graphs() {
  for (auto& [key, g] : graphs_)
    if (g.id >= 0) model_.device().drop_graph(g.id);
  graphs_.clear();
  live_graphs_ = 0;
}

}  // namespace tandem
