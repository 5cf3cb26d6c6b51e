#pragma once
// Where each rank runs, and whether its gradients can all-reduce over NCCL.
//
// NCCL needs every rank on a GPU of its own: it refuses two ranks on one GPU (the
// emulated clusters of a one-GPU machine put several ranks there), and it cannot
// include a rank that computes on the CPU. Every rank therefore describes its
// placement (host, GPU uuid), rank 0 gathers them and decides for all, and when any
// rank breaks the rule the gradients go through the host transport (MPI) instead,
// with a log line that says which ranks prevented NCCL and why.
//
// Two ranks share a GPU when they run on the same host and report the same uuid; a
// uuid is compared only within a host, so the same string on two hosts counts as two
// GPUs. This file knows nothing of CUDA, so the decision is tested on any machine.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

struct RankPlacement {
  std::string host;      // gethostname()
  bool on_gpu = false;   // whether this rank computes on a GPU
  std::string gpu_uuid;  // "GPU-8f0c…" as nvidia-smi writes it; empty on the CPU
  int cuda_device = -1;  // the CUDA ordinal this process uses (as it sees them); -1 on the CPU
};

struct NcclDecision {
  bool use = false;
  std::string reason;  // the log line: what NCCL does, or what prevented it
};

// Pure: the same placements give the same decision on every rank.
NcclDecision decide_nccl(const std::vector<RankPlacement>& ranks);

// A RankPlacement as a fixed-size record, to travel through fixed-size collectives
// (every rank sends the same number of bytes). Strings longer than their field are
// cut to its maximum, which is stated here; a record read back never runs past its
// fields, whatever bytes it holds.
struct PlacementRecord {
  static constexpr size_t kMaxHostChars = 255;  // a fully qualified name's limit (RFC 1035)
  static constexpr size_t kMaxUuidChars = 63;   // "GPU-" + 36 characters fits with room
  char host[kMaxHostChars + 1];
  char gpu_uuid[kMaxUuidChars + 1];
  int32_t on_gpu;
  int32_t cuda_device;
};

PlacementRecord to_record(const RankPlacement& placement);
RankPlacement from_record(const PlacementRecord& record);

}  // namespace tandem
