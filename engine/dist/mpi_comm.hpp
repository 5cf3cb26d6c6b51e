#pragma once
// Comm over MPI (OpenMPI from Debian). Collectives are the non-blocking MPI calls,
// completed by a wait that polls MPI_Test for a short while and then sleeps between
// polls (see comm.hpp), bounded by the deadline.
#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>

#include "engine/dist/comm.hpp"
#include "engine/dist/mpi_scatter_gather.hpp"
#include "engine/dist/shm_allreduce.hpp"

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
  void post_report(const void* report, size_t bytes, void* reports) override;
  void finish_reports(const char* what) override;
  bool reports_ready() override;
  void barrier(const char* what) override;
  void prepare_allreduce(size_t count) override;
  // With shared memory, the arrival is the shared all-reduce's first barrier.
  void arrive_and_allreduce(float* data, size_t count, double* idle_ms, const char* what) override;
  void broadcast(void* data, size_t bytes, const char* what) override;
  std::unique_ptr<GroupComm> split(int color, const char* what) override;
  std::unique_ptr<Channel> open_channel(const char* what, const std::vector<int>& tags, size_t max_bytes) override;
  [[noreturn]] void abort(const std::string& why) override;
  std::vector<int> silent_ranks() override;
  std::unique_ptr<AsyncAllreduce> open_async_allreduce(const char* what, Wire wire) override;

private:
  // Waits for all requests; on the deadline aborts, naming the missing ranks: those
  // behind the requests still open (peers[i] is the rank request i waits for, -1 if
  // unknown), or, on rank 0, those whose posted report has not come.
  void wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers, const char* what);
  std::string missing_ranks(std::vector<MPI_Request>& requests, const std::vector<int>& peers);
  // Past a deadline: aborts the run, naming the missing ranks: those in `named`
  // ("1, 3", whom this rank waited for) that also miss a roll call of the ranks at
  // their deadlines, else those that miss it, else `named`; if_none when none.
  [[noreturn]] void fail_deadline(const std::string& named, const char* if_none, const char* what);
  // The poll loop itself: until done() is true, yielding then sleeping, aborting
  // with the missing ranks at the deadline.
  void poll_until(const std::function<bool()>& done, std::vector<MPI_Request>& requests,
                  const std::vector<int>& peers, const char* what);
  void allreduce(void* data, size_t count, MPI_Datatype type, const char* what, MPI_Comm comm = MPI_COMM_WORLD);
  void set_up_two_levels(int node_size);
  ShmAllreduce::Wait node_wait(const char* what);  // the host's window, in two levels
  // Waits in a window's barrier until the deadline, then names who is missing (as
  // names[rank] of the window's ranks where given).
  ShmAllreduce::Wait window_wait(ShmAllreduce& shm, std::vector<int> names, const char* what);
  void hold_roll_call();
  ShmAllreduce::Wait shm_wait(const char* what);

  int rank_ = 0, size_ = 1;
  std::once_flag roll_call_once_;  // the roll call (silent_ranks), held once per process
  std::vector<int> silent_;        // those it did not hear
  bool thread_multiple_ = false;
  MPI_Comm node_ = MPI_COMM_NULL;       // the ranks on this host
  std::unique_ptr<ShmAllreduce> shm_;  // when every rank is on this host
  // Several hosts, some with several ranks: the float all-reduce in two levels (the
  // host's window, then its first rank across hosts). TANDEM_TWO_LEVEL_ALLREDUCE=0:
  // every rank across the network, for comparison.
  bool two_level_ = false;
  std::unique_ptr<ShmAllreduce> node_shm_;  // this host's ranks, when it runs several
  std::vector<int> node_world_ranks_;       // their world ranks, to name them
  MPI_Comm leaders_ = MPI_COMM_NULL;        // the first rank of every host
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
  ScatterGatherSum scatter_gather_;  // large float32 sums' buffers, kept between steps
  std::vector<MPI_Request> report_requests_;  // posted reports, completed by finish_reports()
  std::vector<int> report_peers_;
};

}  // namespace tandem
