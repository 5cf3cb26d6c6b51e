// NcclComm on one GPU: a one-rank communicator (a LocalComm as its host) sums a
// device buffer in place (a sum over one rank leaves it unchanged) and returns;
// split(0, 0) gives a one-rank group whose all-reduce works too; and one all-reduce
// of 10M floats is timed. Exits 77 (skipped) without a GPU or without CUDA.
//
// Several ranks cannot be tested here: NCCL refuses two ranks on one GPU, and the
// GPU machines have one. The multi-rank path (placement gathering, the NCCL
// decision, the deadlines) is covered by test_gpu_placement and, across GPUs, needs
// a machine with one GPU per rank.
#include <cstdio>
#include <memory>
#include <vector>

#include "engine/core/gpu_probe.hpp"

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/core/clock.hpp"
#include "engine/dist/local_comm.hpp"
#include "engine/dist/nccl_comm.hpp"
#endif

#if TANDEM_HAVE_CUDA
namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  if (!ok) ++failures;
}

bool cuda_ok(cudaError_t rc, const char* call) {
  if (rc == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", call, cudaGetErrorString(rc));
  ++failures;
  return false;
}

// Fills the device buffer with i * 0.25, all-reduces it with `reduce`, and checks it
// came back unchanged.
template <typename Reduce>
void check_unchanged(float* dev, size_t count, Reduce&& reduce, const char* what) {
  std::vector<float> host(count), back(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 4096) * 0.25f;
  if (!cuda_ok(cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy")) return;
  reduce(dev, count);
  if (!cuda_ok(cudaMemcpy(back.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy")) return;
  expect(back == host, what);
}

}  // namespace
#endif

int main() {
  const tandem::GpuProbe gpus = tandem::probe_gpus();
  if (gpus.devices.empty()) {
    std::printf("skipped: no GPU (%s)\n", gpus.reason.c_str());
    return 77;
  }
#if TANDEM_HAVE_CUDA
  using namespace tandem;
  for (const auto& d : gpus.devices) std::printf("gpu: %s\n", d.c_str());
  if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice")) return 1;
  cudaStream_t stream = nullptr;
  if (!cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) return 1;

  const RankPlacement me = my_placement(true, 0);
  std::printf("placement: host %s, GPU %s (device %d)\n", me.host.c_str(), me.gpu_uuid.c_str(), me.cuda_device);
  expect(me.on_gpu && me.gpu_uuid.rfind("GPU-", 0) == 0 && me.gpu_uuid.size() == 40, "the GPU uuid reads as GPU-…");

  // One rank: make_gpu_world_comm leaves the world alone.
  auto local = make_gpu_world_comm(std::make_unique<LocalComm>(), me, stream);
  expect(local->name() == "local", "make_gpu_world_comm keeps a one-rank world");

  auto host = std::make_unique<LocalComm>();
  host->set_timeout_s(60);
  auto nccl = std::make_unique<NcclComm>(std::move(host), 0, stream);
  expect(nccl->rank() == 0 && nccl->size() == 1 && nccl->device_memory() && nccl->name() == "nccl",
         "a one-rank NcclComm over a LocalComm");
  expect(nccl->timeout_s() == 60, "the NcclComm takes its host's timeout");

  constexpr size_t kSmall = 1000, kLarge = 10'000'000;
  float* dev = nullptr;
  if (!cuda_ok(cudaMalloc(reinterpret_cast<void**>(&dev), kLarge * sizeof(float)), "cudaMalloc")) return 1;

  check_unchanged(dev, kSmall, [&](float* d, size_t n) { nccl->allreduce_sum(d, n, "the small all-reduce"); },
                  "allreduce_sum over one rank leaves the buffer unchanged");
  double idle_ms = -1;
  check_unchanged(
      dev, kSmall, [&](float* d, size_t n) { nccl->arrive_and_allreduce(d, n, &idle_ms, "the iteration's sync"); },
      "arrive_and_allreduce over one rank leaves the buffer unchanged");
  expect(idle_ms >= 0 && nccl->last_sync_end_ms() > 0, "arrive_and_allreduce reports idle time and its end");

  {
    auto group = nccl->split(0, 0, "the split into sync groups");
    expect(group && group->rank() == 0 && group->size() == 1, "split(0, 0) gives a one-rank group");
    if (group)
      check_unchanged(dev, kSmall, [&](float* d, size_t n) { group->allreduce_sum(d, n, "the group all-reduce"); },
                      "the group's all-reduce leaves the buffer unchanged");
    auto none = nccl->split(-1, 0, "a split this rank sits out");
    expect(none == nullptr, "split(NCCL_SPLIT_NOCOLOR) gives no group");
  }  // groups go before their parent

  // Timing, printed only (a claim about speed belongs in tools/bench): the first
  // all-reduce of a size also sets NCCL up for it, so one is run before the timed one.
  check_unchanged(dev, kLarge, [&](float* d, size_t n) { nccl->allreduce_sum(d, n, "the 10M all-reduce"); },
                  "an all-reduce of 10M floats leaves the buffer unchanged");
  const double start = now_ms();
  nccl->allreduce_sum(dev, kLarge, "the timed 10M all-reduce");
  std::printf("one-rank NCCL all-reduce of 10M floats (40 MB): %.3f ms, waited for to completion\n",
              now_ms() - start);

  cudaFree(dev);
  nccl.reset();
  cudaStreamDestroy(stream);
  if (failures) {
    std::printf("%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("all NcclComm checks passed\n");
  return 0;
#else
  return 77;
#endif
}
