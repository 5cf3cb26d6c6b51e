#include "engine/dist/gpu_placement.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace tandem {

namespace {

// "rank 2", "ranks 2 and 3", "ranks 0, 1 and 2"; long lists fold runs of three or
// more consecutive ranks ("ranks 0-31 and 40"), so 64 ranks on one GPU stay one line.
std::string rank_list(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  const bool fold = ranks.size() > 6;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (fold && j - i >= 2) {
      parts.push_back(std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]));
      i = j + 1;
    } else {
      parts.push_back(std::to_string(ranks[i]));
      ++i;
    }
  }
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) text += k + 1 == parts.size() ? " and " : ", ";
    text += parts[k];
  }
  return text;
}

// Copies s into a field of max_chars + 1 bytes, cut to max_chars, NUL-padded.
void put(char* field, size_t max_chars, const std::string& s) {
  std::memset(field, 0, max_chars + 1);
  std::memcpy(field, s.data(), std::min(s.size(), max_chars));
}

// Reads a field back without trusting it to hold a NUL.
std::string get(const char* field, size_t max_chars) { return std::string(field, strnlen(field, max_chars)); }

}  // namespace

NcclDecision decide_nccl(const std::vector<RankPlacement>& ranks) {
  if (ranks.size() < 2) return {false, "one rank: there is nothing to all-reduce"};

  std::vector<int> on_cpu, no_uuid;
  // (host, uuid) -> the ranks on that GPU, in rank order.
  std::map<std::pair<std::string, std::string>, std::vector<int>> gpus;
  std::set<std::string> hosts;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankPlacement& p = ranks[r];
    hosts.insert(p.host);
    if (!p.on_gpu)
      on_cpu.push_back(static_cast<int>(r));
    else if (p.gpu_uuid.empty())
      no_uuid.push_back(static_cast<int>(r));
    else
      gpus[{p.host, p.gpu_uuid}].push_back(static_cast<int>(r));
  }

  std::vector<std::string> problems;
  if (on_cpu.size() == ranks.size()) return {false, "every rank runs on the CPU: gradients go through MPI"};
  if (!on_cpu.empty())
    problems.push_back(rank_list(on_cpu) + (on_cpu.size() == 1 ? " runs" : " run") + " on the CPU (mixed devices)");
  if (!no_uuid.empty())
    problems.push_back(rank_list(no_uuid) + (no_uuid.size() == 1 ? " is on a GPU" : " are on GPUs") +
                       " whose uuid could not be read (NCCL needs to know that no two ranks share one)");
  // Listed in order of their first rank; a cluster with many shared GPUs names a few.
  std::vector<const std::pair<const std::pair<std::string, std::string>, std::vector<int>>*> shared;
  for (const auto& gpu : gpus)
    if (gpu.second.size() > 1) shared.push_back(&gpu);
  std::sort(shared.begin(), shared.end(), [](auto* a, auto* b) { return a->second.front() < b->second.front(); });
  constexpr size_t kMaxNamed = 4;
  for (size_t i = 0; i < std::min(shared.size(), kMaxNamed); ++i) {
    const auto& [where, on_it] = *shared[i];
    problems.push_back(rank_list(on_it) + " share GPU " + where.second + " on host " + where.first +
                       " (NCCL needs one GPU per rank)");
  }
  if (shared.size() > kMaxNamed)
    problems.push_back("and " + std::to_string(shared.size() - kMaxNamed) + " more GPUs are shared");

  if (!problems.empty()) {
    std::string reason;
    for (const auto& p : problems) reason += (reason.empty() ? "" : "; ") + p;
    return {false, reason + ": gradients go through MPI"};
  }
  return {true, "gradients all-reduce over NCCL across " + std::to_string(ranks.size()) + " GPUs on " +
                    std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts")};
}

PlacementRecord to_record(const RankPlacement& placement) {
  PlacementRecord record;
  put(record.host, PlacementRecord::kMaxHostChars, placement.host);
  put(record.gpu_uuid, PlacementRecord::kMaxUuidChars, placement.gpu_uuid);
  record.on_gpu = placement.on_gpu ? 1 : 0;
  record.cuda_device = placement.cuda_device;
  return record;
}

RankPlacement from_record(const PlacementRecord& record) {
  RankPlacement placement;
  placement.host = get(record.host, PlacementRecord::kMaxHostChars);
  placement.gpu_uuid = get(record.gpu_uuid, PlacementRecord::kMaxUuidChars);
  placement.on_gpu = record.on_gpu != 0;
  placement.cuda_device = record.cuda_device;
  return placement;
}

}  // namespace tandem
