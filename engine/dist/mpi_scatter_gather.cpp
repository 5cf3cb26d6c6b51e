#include "engine/dist/mpi_scatter_gather.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include <fmt/format.h>

#include "engine/dist/mpi_check.hpp"

namespace tandem {

bool ScatterGatherSum::fits(size_t count, int size) {
  return size > 1 && count >= kScatterGatherMinFloats && count <= static_cast<size_t>(INT_MAX);
}

void split_parts(size_t count, int size, std::vector<int>& counts, std::vector<int>& displs) {
  const size_t n = static_cast<size_t>(size);
  counts.resize(n);
  displs.resize(n);
  for (size_t j = 0; j < n; ++j) {
    displs[j] = static_cast<int>(count * j / n);
    counts[j] = static_cast<int>(count * (j + 1) / n) - displs[j];
  }
}

void ScatterGatherSum::exchange(float* data, size_t count, MPI_Comm comm, MPI_Request* request, const char* what) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  data_ = data;
  const size_t n = static_cast<size_t>(size_);
  split_parts(count, size_, counts_, displs_);
  // Every part but this rank's own goes to its rank; from each other rank comes its
  // copy of this rank's part.
  const size_t me = static_cast<size_t>(rank_);
  const int mine = counts_[me];
  send_counts_ = counts_;
  send_counts_[me] = 0;
  recv_counts_.assign(n, mine);
  recv_counts_[me] = 0;
  recv_displs_.resize(n);
  for (size_t j = 0; j < n; ++j) recv_displs_[j] = static_cast<int>(j - (j > me ? 1 : 0)) * mine;
  recv_.resize(static_cast<size_t>(mine) * (n - 1));
  check_mpi(MPI_Ialltoallv(data_, send_counts_.data(), displs_.data(), MPI_FLOAT, recv_.data(), recv_counts_.data(),
                           recv_displs_.data(), MPI_FLOAT, comm, request),
            kExchangeCall, what);
}

void ScatterGatherSum::gather(MPI_Comm comm, MPI_Request* request, const char* what) {
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  const size_t mine = static_cast<size_t>(counts_[me]);
  float* part = data_ + displs_[me];
  // In rank order, from rank 0's copy on (this rank's own from data_), as the shared-
  // memory sum adds them: the same floats whichever rank sums the part. The sum
  // grows in rank 0's copy (this rank's part, or the first received), no other buffer.
  const auto term = [&](size_t j) -> float* {
    return j == me ? part : recv_.data() + (j - (j > me ? 1 : 0)) * mine;
  };
  float* acc = term(0);
  for (size_t j = 1; j < n; ++j) {
    const float* from = term(j);
    for (size_t i = 0; i < mine; ++i) acc[i] += from[i];
  }
  if (acc != part) std::copy(acc, acc + mine, part);
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data_, counts_.data(), displs_.data(), MPI_FLOAT, comm,
                            request),
            kGatherCall, what);
}

void ScatterGatherSum::sum(float* data, size_t count, MPI_Comm comm, const char* what,
                           const std::function<void(MPI_Request&, const char*)>& wait) {
  const std::string exchanging = fmt::format("{} (its reduce-scatter)", what);
  const std::string gathering = fmt::format("{} (its allgather)", what);
  MPI_Request r = MPI_REQUEST_NULL;
  exchange(data, count, comm, &r, exchanging.c_str());
  wait(r, exchanging.c_str());
  r = MPI_REQUEST_NULL;
  gather(comm, &r, gathering.c_str());
  wait(r, gathering.c_str());
}

}  // namespace tandem
