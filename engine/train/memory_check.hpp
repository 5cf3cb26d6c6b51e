#pragma once
// Whether the model fits each worker's device, checked before anything is
// allocated (by `tandem run` before it starts the ranks, `sim` and `profile` before
// they build the model): a model too big for the machine (model_args.hidden = {60000, 60000},
// 3.6 billion parameters) used to grow to 11.8 GB and more before the kernel
// stopped it, with no word of why.
//
// What a worker needs is estimated from the model's spec (model_footprint: its
// layers' shapes, no allocation): the parameters, their gradients, the optimizer's
// state (SGD momentum: one more copy, AdamW: two; accumulation: one more gradient
// buffer), the relaxed sync modes' host copies, and the
// buffers of forward and backward at the largest local batch the worker can be
// given (the planned one; with a policy, up to policy.max_batch in each micro-batch,
// or the first plan where a policy's caps are measured; the global batch when a
// random or proportional plan decides), or of forward alone at the evaluation
// batch if that is more. The buffers are estimated within about 2x; the rest is
// exact. A run is refused only when this exceeds what the device has:
//   CPU  the host's available memory (MemAvailable in /proc/meminfo) shared by the
//        CPU ranks this host runs; a rank started by an mpirun of the user's, which
//        cannot know whether the others have allocated already, uses MemTotal;
//   GPU  the device's free memory when `tandem run` started (memory another job
//        holds is not the run's), else its total, shared by the ranks placed on it.
// Nothing is checked where the device's memory cannot be read.
#include <cstdint>
#include <string>

#include "engine/nn/model.hpp"
#include "engine/train/config.hpp"

namespace tandem {

struct MemoryNeed {
  double params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0, sync_bytes = 0, buffers_bytes = 0;
  int64_t batch = 0;       // the batch the buffers are for
  bool eval_batch = false;  // that batch is the evaluation batch (forward only)
  double total() const { return params_bytes + grads_bytes + optimizer_bytes + sync_bytes + buffers_bytes; }
};

// The largest local batch worker `worker` of `workers` can be given, as memory_need
// counts it (in `accumulate` micro-batches).
int64_t largest_local_batch(const ExperimentConfig& cfg, int workers, int worker);

MemoryNeed memory_need(const ModelFootprint& model, const ExperimentConfig& cfg, int64_t local_batch);

// A device's memory for one worker, and how it was found, for the message.
struct DeviceMemory {
  double bytes = 0;
  std::string what;  // "the CPU: 22.5 GiB available on this host (MemAvailable), shared by 2 CPU ranks"
};

// Throws a tandem::Error with the numbers when `need` exceeds `memory`.
void check_fits(const MemoryNeed& need, const DeviceMemory& memory, const ExperimentConfig& cfg, int worker);

// Each GPU's free memory now (NVML: engine/core/gpu_probe.hpp), recorded for this
// process and the ranks it starts on this host (TANDEM_GPU_FREE_BYTES, one number per
// CUDA device): what the check and the measured caps below count for a GPU, so memory
// that another job holds is not counted as the run's. Called by `tandem run` before
// any rank starts; where it was not (an mpirun of the user's) or NVML cannot be read,
// a GPU counts its total memory. Nothing where there is no GPU.
void record_free_gpu_memory();

// The check over every worker, before any of them allocates. workers: the ranks
// that will each hold the model on this machine (`tandem run`: the experiment's
// workers; `tandem sim` and `profile`: 1). started_by_mpirun: this process is one
// of those ranks, started by an mpirun of the user's (see above).
void check_model_memory(const ExperimentConfig& cfg, int workers, bool started_by_mpirun);

// The most samples each worker can hold at once, its micro-batch (issue 37), where
// nothing gives it a cap: what its share of its device's memory (the CPU: the host's
// MemTotal over the ranks it runs, as a rank of a job sees it; a GPU: its free memory
// at the start (record_free_gpu_memory) or else its total, over the ranks on it) leaves
// after the parameters, the gradients, the optimizer's state and the sync copies, over the buffers of one sample
// (within about 2x, as the check above). 0 where the memory cannot be read or not
// one sample fits (the check refuses such a run). `why`, when given, gets one line a
// worker saying how.
std::vector<int64_t> measured_micro_caps(const ExperimentConfig& cfg, int workers, std::vector<std::string>* why);

// "13.6 GiB", "3.1 MiB": a size for a message.
std::string bytes_text(double bytes);

}  // namespace tandem
