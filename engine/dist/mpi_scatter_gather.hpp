#pragma once
// A large float32 sum over MPI as a reduce-scatter then an allgather, started by hand
// instead of MPI_Iallreduce: rank j gets every rank's j-th of N near-equal parts
// (MPI_Ialltoallv), sums them in float32 in rank order, and sends its sum to every rank
// (MPI_Iallgatherv, in place). Each rank sends and receives (N-1)/N of the buffer in
// each step, the bandwidth a ring moves, at two latencies.
//
// Why by hand: Open MPI's non-blocking all-reduce (coll/libnbc, 4.1) takes a binomial
// tree for fewer than 4 ranks or an in-place sum, whatever the size: a reduce to rank
// 0 then a broadcast, the whole buffer crossing each link twice one way after the
// other. Between 2 namespace hosts at 500 Mbit/s that summed a 15.9 MB gradient in
// 515 ms, 271 ms with libnbc's ring forced (coll_libnbc_iallreduce_algorithm = 1),
// 254 ms at the link's rate. Every rank ends with the same floats: each part is summed
// once, on one rank, in rank order.
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace tandem {

// Below this many floats a sum is latency-bound: MPI_Iallreduce's tree is as good.
constexpr size_t kScatterGatherMinFloats = 16384;

// `count` items cut into `size` near-equal parts: part j is [displs[j], displs[j] +
// counts[j]). The float32 sums here and the bf16 wire's (mpi_async_allreduce.cpp)
// cut alike. count must fit an int.
void split_parts(size_t count, int size, std::vector<int>& counts, std::vector<int>& displs);

// One sum at a time; its buffers stay for the next (a gradient's parts are megabytes,
// which a fresh allocation would fault in again every step).
class ScatterGatherSum {
public:
  // Whether a sum of `count` floats among `size` ranks goes this way (large enough,
  // more than one rank, and its parts' counts fit MPI's ints).
  static bool fits(size_t count, int size);
  // Step 1: `data`'s parts to the ranks that sum them (this rank's stays in place).
  // `data` belongs to the sum until the gather is done. `what`: for an error's message.
  void exchange(float* data, size_t count, MPI_Comm comm, MPI_Request* request, const char* what);
  // Step 2, once step 1 is done: this rank's part summed, and every part gathered into
  // `data`, on `comm`: step 1's or a duplicate of it (the same ranks in the same
  // order); every rank must start the gathers in the same order on it.
  void gather(MPI_Comm comm, MPI_Request* request, const char* what);
  // Both steps on `comm`, each waited for by `wait` (the caller's deadline), which is
  // told the step: "<what> (its reduce-scatter)", "<what> (its allgather)".
  void sum(float* data, size_t count, MPI_Comm comm, const char* what,
           const std::function<void(MPI_Request&, const char*)>& wait);
  // What each step calls, for an error's message.
  static constexpr const char* kExchangeCall = "MPI_Ialltoallv";
  static constexpr const char* kGatherCall = "MPI_Iallgatherv";

private:
  float* data_ = nullptr;
  int rank_ = 0, size_ = 1;
  // Part j: [displs_[j], displs_[j] + counts_[j]) of data_; the alltoallv's counts.
  std::vector<int> counts_, displs_, send_counts_, recv_counts_, recv_displs_;
  std::vector<float> recv_;  // the other ranks' parts of this rank's part, in rank order
};

}  // namespace tandem
