// Chooses the world's transport: MPI when mpirun started this process with several
// ranks, the single-rank fast path otherwise (also under `mpirun -np 1`).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/dist/local_comm.hpp"
#include "engine/dist/mpi_comm.hpp"

namespace tandem {

void Comm::arrive_and_allreduce(float* data, size_t count, double* idle_ms, const char* what) {
  const double start = now_ms();
  barrier(what);
  *idle_ms = now_ms() - start;
  allreduce_sum(data, count, what);
  sync_end_ms_ = now_ms();
}

namespace {
// "1, 3" back to its ranks.
std::vector<int> parse_ranks(const std::string& list) {
  std::vector<int> ranks;
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find(", ", at);
    if (end == std::string::npos) end = list.size();
    ranks.push_back(std::atoi(list.substr(at, end - at).c_str()));
    at = end + 2;
  }
  return ranks;
}
}  // namespace

std::string Comm::missing_text(const std::string& named, const std::string& if_none) {
  const std::vector<int> silent = silent_ranks();
  std::vector<int> missing;
  for (int r : parse_ranks(named))
    if (std::find(silent.begin(), silent.end(), r) != silent.end()) missing.push_back(r);
  if (missing.empty()) missing = silent.empty() ? parse_ranks(named) : silent;
  if (missing.empty()) return if_none;
  std::string list;
  for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return "missing rank(s): " + list + " (stuck, dead or far slower)";
}

std::unique_ptr<GroupComm> Comm::split(int, const char* what) {
  TANDEM_FAIL("the ", name(), " transport has no sync groups (", what, "): grouped modes need several ranks over MPI");
}

std::unique_ptr<Channel> Comm::open_channel(const char* what, const std::vector<int>&, size_t) {
  TANDEM_FAIL("the ", name(), " transport has no message channel (", what,
              "): the parameter server needs several ranks over MPI");
}

std::unique_ptr<Comm> make_world_comm(int* argc, char*** argv) {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size) size = std::getenv("PMI_SIZE");
  const bool several = size ? std::atoi(size) > 1 : launched_by_mpi();
  if (several) return std::make_unique<MpiComm>(argc, argv);
  return std::make_unique<LocalComm>();
}

}  // namespace tandem
