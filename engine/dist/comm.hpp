#pragma once
// Comm: how workers talk. One interface, several transports: LocalComm (a single
// rank: every collective is a no-op, the fast path), MpiComm (OpenMPI, any number
// of ranks on one or many hosts), and later NCCL. Every wait has a deadline: a
// collective that is not done in time aborts the whole job and says which ranks
// were missing (DESIGN.md habit 8), instead of hanging a cluster forever.
//
// Waiting never busy-polls a core for long: ranks often share cores (4 emulated
// workers on 2 cores), and a rank spinning in a collective would steal the CPU from
// the ranks still computing. Waits poll briefly, then sleep between polls.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem {

class Comm {
public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // In-place SUM over all ranks.
  virtual void allreduce_sum(float* data, size_t count, const char* what) = 0;
  virtual void allreduce_sum(double* data, size_t count, const char* what) = 0;

  // The arrival point of an iteration, as one exchange: every rank sends `bytes`
  // (its report) to rank 0, which receives them all into `reports` (size() * bytes;
  // rank 0's own included) and then sends `reply_bytes` (its decision) back to every
  // rank. Rank 0 names the ranks that did not arrive by the deadline.
  virtual void gather_then_release(const void* report, size_t bytes, void* reports, void* reply,
                                   size_t reply_bytes, const char* what) = 0;

  // From rank 0 to all: data of `bytes` (all ranks pass the same size).
  virtual void broadcast(void* data, size_t bytes, const char* what) = 0;

  // Ends every rank of the job with this message (never returns).
  [[noreturn]] virtual void abort(const std::string& why) = 0;

  void set_timeout_s(double s) { timeout_s_ = s; }
  double timeout_s() const { return timeout_s_; }

protected:
  double timeout_s_ = 300.0;
};

// Whether this process was started by mpirun (OpenMPI, PMIx or a PMI launcher).
bool launched_by_mpi();
// The world: MpiComm when started by mpirun with more than one rank, else LocalComm.
std::unique_ptr<Comm> make_world_comm(int* argc, char*** argv);

}  // namespace tandem
