#pragma once
// Comm over MPI (OpenMPI from Debian). Collectives are the non-blocking MPI calls,
// completed by a wait that polls MPI_Test for a short while and then sleeps between
// polls (see comm.hpp), bounded by the deadline.
#include <mpi.h>

#include "engine/dist/comm.hpp"

namespace tandem {

class MpiComm final : public Comm {
public:
  // Initialises MPI (once per process); finalised by the destructor.
  MpiComm(int* argc, char*** argv);
  ~MpiComm() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  void allreduce_sum(float* data, size_t count, const char* what) override;
  void allreduce_sum(double* data, size_t count, const char* what) override;
  void gather_then_release(const void* report, size_t bytes, void* reports, void* reply, size_t reply_bytes,
                           const char* what) override;
  void broadcast(void* data, size_t bytes, const char* what) override;
  [[noreturn]] void abort(const std::string& why) override;

private:
  // Waits for all requests; on the deadline aborts, naming the ranks behind the
  // requests still open (peers[i] is the rank request i waits for, -1 if unknown).
  void wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers, const char* what);
  void allreduce(void* data, size_t count, MPI_Datatype type, const char* what);

  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
};

}  // namespace tandem
