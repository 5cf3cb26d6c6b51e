#include "engine/train/memory_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/core/gpu_probe.hpp"

namespace tandem {

namespace {

constexpr double kFloat = sizeof(float);

// A /proc/meminfo line ("MemAvailable:   24230052 kB") in bytes; 0 when unreadable.
double meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  double kb = 0;
  while (in >> name >> kb) {
    std::getline(in, unit);
    if (name == key + ":") return kb * 1024.0;
  }
  return 0.0;
}

// This host's ranks under an mpirun of the user's (OpenMPI, MPICH); 0 when not said.
int ranks_on_this_host() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(var)) return std::max(0, std::atoi(v));
  return 0;
}

// What the message suggests to shrink: the model's arguments as the experiment gave them.
std::string model_args_text(const ExperimentConfig& cfg) {
  const auto resolved = nlohmann::json::parse(cfg.resolved_json, nullptr, /*allow_exceptions=*/false);
  if (!resolved.is_object()) return "model_args";
  const std::string file = resolved.contains("model") && resolved["model"].is_object()
                               ? resolved["model"].value("file", std::string("the model file"))
                               : std::string("the model file");
  const std::string args = resolved.contains("model_args") ? resolved["model_args"].dump() : "{}";
  return "model_args (now " + args + ", read by " + file + ")";
}

// The device each worker computes on, as choose_device() will pick it: cpu, cuda, or
// "" (a GPU asked for where there is none: choose_device refuses that itself).
std::vector<std::string> device_kinds(const DeviceConfig& cfg, int workers, GpuProbe* gpus) {
  std::vector<std::string> kinds(static_cast<size_t>(workers));
  bool probed = false;
  for (int r = 0; r < workers; ++r) {
    std::string kind = r < static_cast<int>(cfg.per_worker.size()) ? cfg.per_worker[static_cast<size_t>(r)] : cfg.kind;
    if (kind != "cpu") {
      if (!probed) *gpus = probe_gpus();
      probed = true;
      kind = !gpus->devices.empty() ? "cuda" : kind == "auto" ? "cpu" : "";
    }
    kinds[static_cast<size_t>(r)] = kind;
  }
  return kinds;
}

constexpr const char* kFreeGpuVar = "TANDEM_GPU_FREE_BYTES";

// What record_free_gpu_memory() left in the environment: bytes per CUDA device.
std::vector<double> recorded_free_gpu_memory() {
  std::vector<double> out;
  const char* text = std::getenv(kFreeGpuVar);
  if (!text) return out;
  for (const char* at = text; *at;) {
    char* end = nullptr;
    out.push_back(std::strtod(at, &end));
    if (end == at) return {};  // not a list of numbers: nothing is trusted
    at = *end == ',' ? end + 1 : end;
  }
  return out;
}

// Each worker's share of its device's memory (bytes 0: not known, not checked).
std::vector<DeviceMemory> device_memory(const ExperimentConfig& cfg, int workers, bool started_by_mpirun) {
  GpuProbe gpus;
  const std::vector<std::string> kinds = device_kinds(cfg.device, workers, &gpus);
  const int cpu_ranks = started_by_mpirun && ranks_on_this_host() > 0
                            ? ranks_on_this_host()
                            : static_cast<int>(std::count(kinds.begin(), kinds.end(), "cpu"));
  const char* key = started_by_mpirun ? "MemTotal" : "MemAvailable";
  const double host = meminfo_bytes(key);
  const size_t g_count = gpus.memory_bytes.size();
  const std::vector<double> free_at_start = recorded_free_gpu_memory();
  std::vector<int> on_gpu(g_count, 0);
  for (int r = 0; r < workers; ++r)
    if (kinds[static_cast<size_t>(r)] == "cuda") ++on_gpu[static_cast<size_t>(r) % g_count];
  std::vector<DeviceMemory> out(static_cast<size_t>(workers));
  for (int r = 0; r < workers; ++r) {
    DeviceMemory& m = out[static_cast<size_t>(r)];
    if (kinds[static_cast<size_t>(r)] == "cpu" && host > 0) {
      m.bytes = host / std::max(cpu_ranks, 1);
      m.what = cpu_ranks > 1 ? fmt::format("its device, the CPU, has {} ({} {} on this host, shared by {} ranks)",
                                           bytes_text(m.bytes), bytes_text(host), key, cpu_ranks)
                             : fmt::format("its device, the CPU, has {} ({} on this host)", bytes_text(m.bytes), key);
    } else if (kinds[static_cast<size_t>(r)] == "cuda") {
      const size_t g = static_cast<size_t>(r) % g_count;
      const bool free = g < free_at_start.size() && free_at_start[g] > 0;
      m.bytes = (free ? free_at_start[g] : gpus.memory_bytes[g]) / on_gpu[g];
      m.what = fmt::format("its device, GPU {} ({}), has {}{}{}", g, gpus.devices[g], bytes_text(m.bytes),
                           free ? " free at the start" : "",
                           on_gpu[g] > 1 ? fmt::format(" (shared by {} ranks)", on_gpu[g]) : "");
    }
  }
  return out;
}

}  // namespace

void record_free_gpu_memory() {
  const GpuProbe gpus = probe_gpus();
  if (gpus.free_bytes.empty()) return;
  std::string list;
  for (double b : gpus.free_bytes) list += (list.empty() ? "" : ",") + fmt::format("{:.0f}", b);
  setenv(kFreeGpuVar, list.c_str(), /*overwrite=*/1);
}

std::string bytes_text(double bytes) {
  const double mib = bytes / (1024.0 * 1024.0);
  return mib < 1024.0 ? fmt::format("{:.1f} MiB", mib) : fmt::format("{:.1f} GiB", mib / 1024.0);
}

int64_t largest_local_batch(const ExperimentConfig& cfg, int workers, int worker) {
  const int64_t B = cfg.global_batch;
  int64_t cap = cfg.global_batch_max();  // a policy may carry B up to policy.global_batch.max
  if (worker < static_cast<int>(cfg.policy.max_batch.size()))
    cap = std::min(cap, cfg.policy.max_batch[static_cast<size_t>(worker)]);
  // A policy holds at most a worker's cap at once (max_batch bounds the micro-batch,
  // whatever the count): as a local batch in `accumulate` micro-batches, that many
  // caps. Without given caps it gets measured ones (measured_micro_caps), which fit
  // by construction: the plan it starts from is what must fit.
  if (!cfg.policy.file.empty() && !cfg.policy.max_batch.empty()) return cap * std::max<int64_t>(cfg.accumulate, 1);
  if (cfg.plan.kind == "fixed" && worker < static_cast<int>(cfg.plan.batches.size()))
    return cfg.plan.batches[static_cast<size_t>(worker)];
  if (cfg.plan.kind == "equal") return (B + workers - 1) / std::max(workers, 1);
  return cap;  // proportional, random: up to the whole global batch
}

MemoryNeed memory_need(const ModelFootprint& model, const ExperimentConfig& cfg, int64_t local_batch) {
  MemoryNeed need;
  const double params = static_cast<double>(model.params) * kFloat;
  need.params_bytes = params;
  need.grads_bytes = params;
  // SGD's velocity, AdamW's two moments. Micro-batches sum in the gradients themselves
  // (StepContext::accumulate_grads): no second copy.
  need.optimizer_bytes = cfg.optimizer.name == "adamw" ? 2.0 * params : cfg.optimizer.momentum != 0.0 ? params : 0.0;
  // The relaxed modes keep the parameters and the velocity on the host too.
  need.sync_bytes = cfg.plan.sync.mode != "bsp" ? 2.0 * params : 0.0;
  // With accumulation the buffers hold one micro-batch at a time.
  const int64_t micro = (local_batch + cfg.accumulate - 1) / std::max<int64_t>(cfg.accumulate, 1);
  const double train = model.buffer_floats_per_sample * static_cast<double>(micro) * kFloat;
  // Evaluation runs forward only: the outputs, about half of a training step's buffers.
  const double eval = 0.5 * model.buffer_floats_per_sample * static_cast<double>(cfg.eval_batch) * kFloat;
  need.eval_batch = eval > train;
  need.buffers_bytes = std::max(train, eval);
  need.batch = need.eval_batch ? cfg.eval_batch : micro;
  return need;
}

void check_fits(const MemoryNeed& need, const DeviceMemory& memory, const ExperimentConfig& cfg, int worker) {
  if (memory.bytes <= 0 || need.total() <= memory.bytes) return;
  const std::string parts = fmt::format(
      "parameters {}, gradients {}, optimizer state {}{}, activations {} at {} batch {}", bytes_text(need.params_bytes),
      bytes_text(need.grads_bytes), bytes_text(need.optimizer_bytes),
      need.sync_bytes > 0 ? ", sync copies " + bytes_text(need.sync_bytes) : std::string(),
      bytes_text(need.buffers_bytes), need.eval_batch ? "evaluation" : "local", need.batch);
  TANDEM_FAIL_HINT("make the model smaller through its " + model_args_text(cfg) + ", or lower the batch (" +
                       (need.eval_batch ? "eval_batch" : "global_batch, policy.max_batch") +
                       "), or run fewer ranks on this host",
                   "model '", cfg.model.name, "' needs ~", bytes_text(need.total()), " on worker ", worker, " (",
                   parts, ") but ", memory.what, ": refused before allocating it");
}

std::vector<int64_t> measured_micro_caps(const ExperimentConfig& cfg, int workers, std::vector<std::string>* why) {
  const ModelFootprint model = model_footprint(cfg.model);
  const std::vector<DeviceMemory> memory = device_memory(cfg, workers, /*started_by_mpirun=*/true);
  MemoryNeed fixed = memory_need(model, cfg, 0);
  fixed.buffers_bytes = 0;
  const double held = fixed.total();
  const double per_sample = model.buffer_floats_per_sample * kFloat;
  std::vector<int64_t> caps(static_cast<size_t>(workers), 0);
  for (int r = 0; r < workers; ++r) {
    const DeviceMemory& m = memory[static_cast<size_t>(r)];
    if (m.bytes <= 0 || per_sample <= 0) continue;
    const double fit = std::floor((m.bytes - held) / per_sample);
    caps[static_cast<size_t>(r)] = fit >= 1 ? static_cast<int64_t>(std::min(fit, 1e15)) : 0;
    if (why)
      why->push_back(fmt::format("worker {} holds {} samples at once: {} less {} of parameters, gradients and "
                                 "optimizer state, at {} a sample", r, caps[static_cast<size_t>(r)], m.what,
                                 bytes_text(held), bytes_text(per_sample)));
  }
  return caps;
}

void check_model_memory(const ExperimentConfig& cfg, int workers, bool started_by_mpirun) {
  const ModelFootprint model = model_footprint(cfg.model);
  const std::vector<DeviceMemory> memory = device_memory(cfg, workers, started_by_mpirun);
  for (int r = 0; r < workers; ++r)
    check_fits(memory_need(model, cfg, largest_local_batch(cfg, workers, r)), memory[static_cast<size_t>(r)], cfg, r);
}

}  // namespace tandem
