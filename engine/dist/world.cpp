// Chooses the world's transport: MPI when mpirun started this process with several
// ranks, the single-rank fast path otherwise (also under `mpirun -np 1`).
#include <cstdlib>

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
