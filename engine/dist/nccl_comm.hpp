#pragma once
// Comm over NCCL for the gradients of GPU workers, the host transport for the rest.
//
// NcclComm sums device buffers with NCCL on the CUDA stream the worker computes on,
// so the all-reduce is ordered after the backward pass without a host sync. It owns
// the world's host Comm (MpiComm) and hands it everything that lives in host memory
// or is about who arrived: reports, barriers, broadcasts, double sums, aborts. The
// iteration's arrival is a host barrier, whose deadline names the missing ranks;
// only then does the NCCL all-reduce run, so a deadline inside NCCL means every rank
// had arrived and one died or hung inside it (or the interconnect failed).
//
// Every NCCL communicator is non-blocking (ncclConfig_t::blocking = 0): set-up,
// all-reduce, split and finalize return at once, and the wait for them polls
// ncclCommGetAsyncError (and a CUDA event for the all-reduce's completion) against
// the deadline, yielding at first and then sleeping between polls (ranks share
// cores). On expiry the communicator is aborted (ncclCommAbort, itself waited for at
// most 10 s) and the job ends through the host Comm's abort, with a message
// saying what did not finish and what to do. A blocking communicator could not be
// aborted from the thread stuck inside it.
//
// The class compiles everywhere so callers need no #if (dynamic_cast<NcclComm*> is
// simply never true without CUDA); constructing one without CUDA is an error.
// make_gpu_world_comm decides, for all ranks alike, whether NCCL is used at all.
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/dist/comm.hpp"
#include "engine/dist/gpu_placement.hpp"

// NCCL's and CUDA's handle types, declared as nccl.h and driver_types.h declare them.
struct ncclComm;
struct CUstream_st;
struct CUevent_st;

namespace tandem {

class NcclGroupComm;
struct ReduceSite;

class NcclComm final : public Comm {
public:
  // A collective over all ranks of `host_comm` (any Comm: MpiComm across processes, a
  // LocalComm for one rank): rank 0 makes the unique id and broadcasts it over
  // `host_comm`, every rank selects `cuda_device` (cudaSetDevice) and joins. Reductions
  // run on `cuda_stream` (a cudaStream_t; nullptr is the legacy default stream).
  // Takes the host's timeout (collective_timeout_s) as its own.
  NcclComm(std::unique_ptr<Comm> host_comm, int cuda_device, void* cuda_stream);
  // Finalizes and destroys the communicator when it is healthy (bounded by the
  // deadline; aborting past it), aborts it otherwise. Never throws. Destroy every
  // NcclGroupComm split from this one first.
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string name() const override { return "nccl"; }
  bool device_memory() const override { return true; }

  // In-place SUM of device memory over all ranks; returns once the sum is in
  // `device_data` (the wait is bounded by the deadline).
  void allreduce_sum(float* device_data, size_t count, const char* what) override;
  // Host memory: through the host Comm.
  void allreduce_sum(double* data, size_t count, const char* what) override {
    host().allreduce_sum(data, count, what);
  }
  void post_report(const void* report, size_t bytes, void* reports) override {
    host().post_report(report, bytes, reports);
  }
  void finish_reports(const char* what) override { host().finish_reports(what); }
  bool reports_ready() override { return host().reports_ready(); }
  void barrier(const char* what) override { host().barrier(what); }
  void broadcast(void* data, size_t bytes, const char* what) override { host().broadcast(data, bytes, what); }
  // Sync groups and the server's channel work on host memory: through the host Comm.
  std::unique_ptr<GroupComm> split(int color, const char* what) override { return host().split(color, what); }
  std::unique_ptr<Channel> open_channel(const char* what, const std::vector<int>& tags, size_t max_bytes) override {
    return host().open_channel(what, tags, max_bytes);
  }
  [[noreturn]] void abort(const std::string& why) override {
    host().abort(why);
    std::abort();  // not reached: the host's abort ends the process
  }
  // Nothing to prepare: NCCL sets up its buffers with the communicator. (The host's
  // shared-memory all-reduce would reserve a segment no float sum ever uses.)
  void prepare_allreduce(size_t) override {}

  // Arrival over the host Comm (a barrier whose deadline names the missing ranks;
  // its duration is *idle_ms), then the NCCL all-reduce of `device_data`. The host
  // arrives once it has *enqueued* the backward pass: for idle_ms to be the wait for
  // slower ranks (and compute_ms the GPU's time), the caller synchronises its stream
  // before arriving; otherwise the GPU's remaining work lands in the all-reduce's time.
  void arrive_and_allreduce(float* device_data, size_t count, double* idle_ms, const char* what) override;

  // A communicator for a sync group, split from this one: a collective over ALL
  // ranks of this Comm. Ranks passing the same color (>= 0) form a group, ordered by
  // key; a rank passing NCCL_SPLIT_NOCOLOR (-1) joins none and gets nullptr. Costs
  // as much as a communicator's set-up: keep the groups while the plan's groups
  // stay the same.
  std::unique_ptr<NcclGroupComm> split(int color, int key, const char* what);

  // The host Comm, its timeout kept equal to this one's (set_timeout_s is not
  // virtual, so it is copied whenever the host is used).
  Comm& host() {
    host_->set_timeout_s(timeout_s_);
    return *host_;
  }

private:
  friend class NcclGroupComm;
  // Sums on `comm` (this one's or a group's) on the stream and waits for the sum to
  // land. On an error or the deadline: aborts `comm`, sets it to nullptr, and ends
  // the job through the host Comm, saying what `site` was.
  void reduce_and_wait(ncclComm*& comm, float* device_data, size_t count, const ReduceSite& site);

  std::unique_ptr<Comm> host_;
  ncclComm* comm_ = nullptr;        // nullptr once aborted
  int cuda_device_ = -1;
  CUstream_st* stream_ = nullptr;
  CUevent_st* reduced_ = nullptr;   // recorded after each all-reduce, polled for its completion
};

// A sync group's communicator: what the group's ranks all-reduce their gradients
// over. Made by NcclComm::split; must not outlive it (it reduces on its stream and
// ends the job through its host Comm).
class NcclGroupComm {
public:
  ~NcclGroupComm();
  NcclGroupComm(const NcclGroupComm&) = delete;
  NcclGroupComm& operator=(const NcclGroupComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // In-place SUM of device memory over the group's ranks, as NcclComm's.
  void allreduce_sum(float* device_data, size_t count, const char* what);

private:
  friend class NcclComm;
  NcclGroupComm(NcclComm& world, ncclComm* comm, int color, int rank, int size)
      : world_(world), comm_(comm), color_(color), rank_(rank), size_(size), close_timeout_s_(world.timeout_s()) {}

  NcclComm& world_;
  ncclComm* comm_;  // nullptr once aborted
  int color_, rank_, size_;
  double close_timeout_s_;  // the finalize's deadline, kept so the destructor needs no world
};

// This process's placement: its host name, and with on_gpu the uuid of `cuda_device`.
RankPlacement my_placement(bool on_gpu, int cuda_device);

// The world's gradient transport. With one rank, or a world that is not MPI, returns
// `world` unchanged. Otherwise every rank's placement reaches rank 0 (bounded, naming
// missing ranks), rank 0 decides with decide_nccl, logs the decision and broadcasts
// it, and every rank returns an NcclComm owning `world` on `cuda_stream`, or `world`
// unchanged. All ranks must call it, at the same point. TANDEM_NCCL=0 in rank 0's
// environment keeps MPI (for comparisons). Without CUDA: returns `world`.
std::unique_ptr<Comm> make_gpu_world_comm(std::unique_ptr<Comm> world, const RankPlacement& mine, void* cuda_stream);

}  // namespace tandem
