#pragma once
// All-reduce through shared memory, for ranks that share one host (the emulated
// clusters of this project, and any multi-GPU box's CPU path). Each rank copies its
// buffer into its slot of an MPI-3 shared window; after a barrier each rank sums
// its 1/N share of the buffer over all slots (a reduce-scatter, in rank order, so
// every rank gets bit-identical sums); after a second barrier each rank copies the
// whole result out. That is two barriers and a few memory passes, instead of the
// message rounds of a general all-reduce that need all ranks scheduled at once —
// costly when ranks outnumber cores. The barriers themselves live in the window too
// (a counter and a sense flag): arriving is one atomic add, and a waiter needs no
// other rank to be scheduled to see the barrier open, unlike MPI's message rounds.
// Waiters sleep on the sense word as a futex and the last arrival wakes them: no
// waiter polls a core away from a rank still computing (ranks outnumber cores in
// emulated clusters), and none waits a polling interval to notice the opening.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tandem {

class ShmAllreduce {
public:
  // node: a communicator of ranks on this host (all of the world's, or a sync
  // group's); host_ranks: how many ranks the host runs in all (0: node's size),
  // which decides whether a waiter may spin before it sleeps.
  explicit ShmAllreduce(MPI_Comm node, int host_ranks = 0);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;
  // Calls open() until it is true, between calls checking the caller's deadline and
  // keeping MPI progressing; open() itself sleeps (on a futex) until it might be.
  using Wait = std::function<void(const std::function<bool()>& open)>;
  // In-place SUM. *arrival_ms, if given, gets the time spent in the first barrier
  // (waiting for every rank to arrive).
  void sum(float* data, size_t count, const Wait& wait, double* arrival_ms = nullptr);
  // A barrier over the node's ranks, through the shared window.
  void barrier(const Wait& wait);
  // From the node's rank 0 to the others: one copy in, a barrier, one copy out.
  void broadcast(void* data, size_t bytes, const Wait& wait);
  // When the last barrier opened (now_ms() clock, the same for every rank of a
  // host): the instant a collective ended for all.
  double last_open_ms() const;
  // The ranks that have not yet entered the barrier this rank waits in ("1, 3"),
  // each named as names[rank] where names are given (a group's world ranks).
  std::string missing_ranks(const std::vector<int>& names = {}) const;
  // Makes room for `count` floats per rank. Collective (every rank, same count) and
  // blocking without a deadline: call it at start-up (Comm::prepare_allreduce), so
  // sum() only grows the window if a larger buffer ever comes.
  void reserve(size_t count);
  // The bytes a broadcast can carry without growing the window (a collective).
  size_t capacity_bytes() const { return capacity_ * sizeof(float); }

private:
  MPI_Comm node_;
  int rank_ = 0, size_ = 1;
  MPI_Win window_ = MPI_WIN_NULL;
  float* base_ = nullptr;  // slot 0 .. size-1, the result, then the broadcasts' two
  int64_t broadcasts_ = 0;  // which broadcast slot is next
  size_t capacity_ = 0;    // floats per slot
  // The barrier's shared state (its own small window) and this rank's sense.
  MPI_Win control_window_ = MPI_WIN_NULL;
public:
  struct Control;

private:
  Control* control_ = nullptr;
  int sense_ = 0;
  double spin_us_ = 0.0;  // spinning before sleeping, where ranks have cores of their own
};

}  // namespace tandem
