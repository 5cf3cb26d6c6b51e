#pragma once
// The gradient buckets' sums over MPI (Comm::open_async_allreduce): non-blocking
// collectives on a communicator of their own (a duplicate of the world), so they never
// interleave with the rank's own collectives, which its main thread runs meanwhile
// (MPI_THREAD_MULTIPLE).
//   fp32  MPI_Iallreduce.
//   bf16  half the bytes: each rank rounds its floats to bfloat16 once and sends
//         rank j the j-th of N near-equal parts (MPI_Ialltoallv); rank j sums the N
//         parts it gets in float32, in rank order, rounds that sum once and sends it
//         to every rank (MPI_Iallgatherv). Every rank ends with the same floats, each
//         within bfloat16's rounding (2^-8 relative) of the float32 sum of the rounded
//         parts. A sum's first `exact` floats (the Control) go in a float32
//         MPI_Iallreduce of their own beside it.
#include <mpi.h>

#include <memory>

#include "engine/dist/comm.hpp"

namespace tandem {

// Takes the communicator (freed with the object).
std::unique_ptr<AsyncAllreduce> make_mpi_async_allreduce(MPI_Comm comm, Wire wire);

}  // namespace tandem
