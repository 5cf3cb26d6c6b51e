#pragma once
// One training step of one worker over its local batch: forward, SUM loss, backward,
// optimizer step. Shared by the trainer, the golden tests and the benchmarks so all
// of them measure and check the same code.
//
// Gradient accumulation: with accumulate = K the local batch is computed in K
// micro-batches (sizes differing by at most one; fewer when the batch has fewer than
// K samples) whose gradients are summed, so a worker whose share does not fit in
// memory at once still takes it. Each micro-batch keeps its samples' positions in the
// global batch (StepContext::first_sample), so dropout masks, and with them the
// result, do not depend on K: the summed gradient is one pass's, to float rounding.
//
// The update divides the summed gradient by the predictions it stands for
// (global_batch * targets_per_sample: the mean per sample, or per token for a
// language model) and clips the mean gradient's global norm (clip_grad_norm), folded
// into one scale factor (engine/nn/optimizer.hpp).
//
// The fused step (fused()) is the same step for one worker, queued whole with no
// wait of the host in it: forward, loss and backward, the gradient's squared norm,
// the decision whether the step is finite and what its scale is (decided on the
// device: kernels/step_rule.hpp), and the update, which the device skips for a
// non-finite step. The host reads the step's results once, when it wants them: the
// bsp loop after it has queued the next step (fused_queue, fused_finish). On a
// device that captures graphs (CUDA) the queued step is captured once per input (its
// pointers, shape and position) and replayed from then on: one launch for the step.
//
// Where the host must come between the compute and the update (several workers
// all-reduce their gradients there; a policy reads the norm), compute() can replay
// graphs too (set_compute_graphs): forward, loss and backward captured per input, so
// a plan's local batch selects its graph or captures one, and the host then reads
// the loss totals, all-reduces and updates as before.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <tuple>

#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"

namespace tandem {

// What a fused step did.
struct FusedResult {
  LossResult loss;
  bool finite = true;      // false: a NaN or Inf in the loss or the gradient, and the update was skipped
  double grad_norm = 0.0;  // the mean gradient's norm before clipping
  bool replayed = false;   // it ran as a captured graph's replay
};

// How the fused steps ran: as captured graphs' replays, or op by op (the first
// sightings of an input, and every step where graphs are off or impossible).
struct GraphCounts {
  int64_t captured = 0, replayed = 0, eager = 0;
  int64_t invalidated = 0;  // every graph dropped: device memory moved
  int64_t evicted = 0;      // every graph dropped: too many inputs held graphs
  int64_t failed = 0;       // captures that failed (that input then runs op by op)
};

struct StepTimes {
  double compute_ms = 0.0;    // forward + loss + backward
  double optimizer_ms = 0.0;  // the parameter update
};

class TrainStep {
public:
  TrainStep(Model& model, Optimizer& optimizer, int64_t accumulate = 1);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;
  // x: [local_batch, ...input]; labels: local_batch * targets_per_sample ints.
  // `global_batch` is the number of samples the (summed) gradient stands for.
  LossResult run(const Tensor& x, const int32_t* labels, int64_t global_batch, double lr, const StepContext& ctx,
                 StepTimes* times = nullptr);
  // The two halves of run(), for workers that all-reduce the gradient in between:
  // forward + loss + backward, in micro-batches (the gradient buffer then holds this
  // worker's SUM) ...
  LossResult compute(const Tensor& x, const int32_t* labels, const StepContext& ctx);
  // ... and the update from the (summed) gradient of `global_batch` samples.
  // grad_sq: that gradient's squared norm, when the caller computed it already
  // (clipping needs it; without it, update computes it when clipping is on).
  void update(int64_t global_batch, double lr, std::optional<double> grad_sq = std::nullopt);
  // The mean gradient's global norm before clipping, at the last update (0 until one
  // ran, and when clipping is off: it is only computed for clipping).
  double last_grad_norm() const { return grad_norm_; }
  Optimizer& optimizer() { return optimizer_; }
  // The micro-batches the next local batches are computed in (a plan's, per worker:
  // Plan::micro_batches); the constructor's `accumulate` until set.
  void set_micro_batches(int64_t k);
  int64_t micro_batches() const { return accumulate_; }
  // The passes a local batch of n samples takes: the micro-batches, fewer when n has
  // fewer samples, and one for an empty batch.
  int64_t passes(int64_t n) const { return n < accumulate_ ? (n > 1 ? n : 1) : accumulate_; }

  // The fused step (above) over a local batch that is the whole global batch (one
  // worker): the update divides by x's samples. `poison` puts a NaN in the gradient
  // before it is checked (fault injection: faults.kind = 'nan'); such a step is never
  // captured. Bit for bit the step compute() + update() take on the same device.
  FusedResult fused(const Tensor& x, const int32_t* labels, const StepContext& ctx, double lr, bool poison = false);
  // fused() in its two halves, for a caller that queues more work before it waits
  // (the next batch's gather, the next step): the step queued, with the read of its
  // results ...
  void fused_queue(const Tensor& x, const int32_t* labels, const StepContext& ctx, double lr, bool poison = false);
  // ... and the oldest queued step's results (waits for that step alone). At most one
  // step may stay unread when the next is queued: the device then takes AdamW's bias
  // corrections for the outcome the host has not read yet.
  FusedResult fused_finish();
  // Fused steps queued and not yet read.
  int unread() const { return static_cast<int>(pending_.size()); }
  // Whether fused() captures graphs where the device and the model allow (default on).
  void set_graphs(bool on);
  // Whether compute() does too (default off: the caller knows whether its inputs
  // recur, and a graph per local batch size pays only then). Needs set_graphs on.
  void set_compute_graphs(bool on);
  bool compute_graphs() const { return compute_graphs_ && graphs(); }
  // Whether they were asked for (graphs() may have turned off since: three failed
  // captures).
  bool compute_graphs_asked() const { return compute_graphs_; }
  // Whether fused() would capture graphs: on, the device captures, the model is capturable.
  bool graphs() const;
  const GraphCounts& graph_counts() const { return graph_counts_; }

private:
  // Forward, loss into totals_ (added to them with `accumulate`), backward.
  void pass(const Tensor& x, const int32_t* labels, const StepContext& ctx, bool accumulate);
  // compute() without the read: forward, loss and backward queued, in micro-batches.
  void queue_compute(const Tensor& x, const int32_t* labels, const StepContext& ctx);
  // The whole fused step queued (its scalars' host slots already written).
  void queue_fused(const Tensor& x, const int32_t* labels, const StepContext& ctx, bool poison);
  // `queue` (the whole fused step, or compute()'s part) as a graph for x's input:
  // replays the input's graph, captures it, or queues the ops (returns whether a graph
  // ran).
  template <typename Queue>
  bool run_graphed(bool whole, const Tensor& x, const int32_t* labels, const StepContext& ctx, Queue queue);
  void drop_graphs();

  // What a captured graph's ops depend on besides device memory: whether it is the
  // whole step or compute()'s part, the input's pointers, its shape (samples, values),
  // the position of its first sample (0 for a model whose pass does not read it) and
  // the micro-batches it is computed in.
  using GraphKey = std::tuple<bool, const float*, const int32_t*, int64_t, int64_t, int64_t, int64_t>;
  struct Graph {
    int id = -1;           // the device's handle; -1: not captured
    bool warm = false;     // a step queued op by op for this input allocated no memory
    bool refused = false;  // its capture allocated memory: it runs op by op
  };

  Model& model_;
  Optimizer& optimizer_;
  int64_t accumulate_;
  bool positional_;  // the model's pass reads the samples' position (Model::reads_sample_position)
  SoftmaxCrossEntropy loss_;
  LossTotals totals_;  // the local batch's loss sum and correct count, on the device
  double grad_norm_ = 0.0;
  StepScalars scalars_;  // the fused step's (kernels/step_rule.hpp)
  bool graphs_on_ = true;
  bool compute_graphs_ = false;
  std::map<GraphKey, Graph> graphs_;
  int live_graphs_ = 0;       // of graphs_, those captured
  int capture_failures_ = 0;  // captures that threw
  static constexpr int kMaxGraphs = 16, kMaxCaptureFailures = 3;
  uint64_t graph_epoch_ = 0;  // the device's memory epoch the captured graphs' pointers are of
  GraphCounts graph_counts_;
  struct Pending {
    int ticket = -1;        // the device's read_doubles_later ticket; -1: not asked yet
    bool replayed = false;  // it ran as a graph's replay
  };
  // Asks for the newest pending step's results, if not yet asked.
  void ask_results();
  std::deque<Pending> pending_;  // fused steps queued and not yet read, oldest first
};

}  // namespace tandem
