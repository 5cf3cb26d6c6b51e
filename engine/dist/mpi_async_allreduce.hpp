#pragma once
// The gradient buckets' sums over MPI (Comm::open_async_allreduce): non-blocking
// collectives on a communicator of their own (a duplicate of the world), so they never
// interleave with the rank's own collectives, which its main thread runs meanwhile
// (MPI_THREAD_MULTIPLE).
//   fp32  a reduce-scatter then an allgather started by hand (mpi_scatter_gather.hpp:
//         Open MPI's MPI_Iallreduce sends the whole buffer twice, one way after the
//         other, between few ranks); MPI_Iallreduce for a small sum.
//   bf16  half the bytes: each rank rounds its floats to bfloat16 once and sends
//         rank j the j-th of N near-equal parts (MPI_Ialltoallv); rank j sums the N
//         parts it gets in float32, in rank order, rounds that sum once and sends it
//         to every rank (MPI_Iallgatherv). Every rank ends with the same floats, each
//         within bfloat16's rounding (2^-8 relative) of the float32 sum of the rounded
//         parts. A sum's first `exact` floats (the Control) go in a float32
//         MPI_Iallreduce of their own beside it.
//
// Two levels (ranks on several hosts, some host running several): each sum in start(),
// whole and blocking (start() runs on the buckets' communication thread, in the order
// every rank starts them): the host's ranks sum through a shared window of their own,
// its first rank sums across hosts with the others' first ranks (the above, polled to
// the end or the deadline), and the result goes back through the window. The bytes
// across hosts are one rank's; a bucket's sum across hosts cannot overlap the next
// one's host sum, which a memory pass makes short.
#include <mpi.h>

#include <memory>
#include <vector>

#include "engine/dist/comm.hpp"
#include "engine/dist/shm_allreduce.hpp"

namespace tandem {

// Takes the communicator (freed with the object).
std::unique_ptr<AsyncAllreduce> make_mpi_async_allreduce(MPI_Comm comm, Wire wire);

// host: this host's ranks (a communicator of their own, freed with the object; null
// where the host runs one rank); wait: how the window's barriers wait (with the
// deadline, naming missing ranks); across: the first ranks' sums (null on the others);
// timeout_s: how long the sum across hosts may take.
std::unique_ptr<AsyncAllreduce> make_two_level_async_allreduce(MPI_Comm host, std::unique_ptr<ShmAllreduce> window,
                                                               ShmAllreduce::Wait wait,
                                                               std::unique_ptr<AsyncAllreduce> across,
                                                               double timeout_s);

}  // namespace tandem
