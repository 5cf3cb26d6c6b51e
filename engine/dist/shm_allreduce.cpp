#include "engine/dist/shm_allreduce.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "engine/core/error.hpp"

namespace tandem {

ShmAllreduce::ShmAllreduce(MPI_Comm node) : node_(node) {
  MPI_Comm_rank(node_, &rank_);
  MPI_Comm_size(node_, &size_);
}

ShmAllreduce::~ShmAllreduce() {
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
}

void ShmAllreduce::reserve(size_t count) {
  if (count <= capacity_) return;
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  // One contiguous window, all of it owned by rank 0: size+1 slots of `count`.
  const size_t slots = static_cast<size_t>(size_) + 1;
  const MPI_Aint bytes = rank_ == 0 ? static_cast<MPI_Aint>(slots * count * sizeof(float)) : 0;
  void* mine = nullptr;
  const int rc = MPI_Win_allocate_shared(bytes, sizeof(float), MPI_INFO_NULL, node_, &mine, &window_);
  TANDEM_CHECK_HINT(rc == MPI_SUCCESS, "check /dev/shm has room for the gradients of every rank",
                    "MPI_Win_allocate_shared of ", slots * count * sizeof(float), " bytes failed");
  MPI_Aint size = 0;
  int disp = 0;
  MPI_Win_shared_query(window_, 0, &size, &disp, &base_);
  capacity_ = count;
}

void ShmAllreduce::sum(float* data, size_t count, const std::function<void()>& barrier) {
  reserve(count);
  const size_t slot = capacity_;
  std::memcpy(base_ + static_cast<size_t>(rank_) * slot, data, count * sizeof(float));
  // The barrier orders the shared stores for the other processes (x86 keeps stores
  // in order; the fences keep the compiler from moving them across).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  barrier();  // every slot written
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // This rank's share [begin, end) of the sum, over the slots in rank order.
  const size_t chunk = (count + static_cast<size_t>(size_) - 1) / static_cast<size_t>(size_);
  const size_t begin = std::min(count, chunk * static_cast<size_t>(rank_)), end = std::min(count, begin + chunk);
  float* result = base_ + static_cast<size_t>(size_) * slot;
  if (begin < end) {
    std::memcpy(result + begin, base_ + begin, (end - begin) * sizeof(float));
    for (int r = 1; r < size_; ++r) {
      const float* src = base_ + static_cast<size_t>(r) * slot;
      for (size_t i = begin; i < end; ++i) result[i] += src[i];
    }
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  barrier();  // every share summed
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::memcpy(data, result, count * sizeof(float));
  // The next call overwrites the slots and the result only after its first
  // barrier, which no rank passes before every rank has copied this result out.
}

}  // namespace tandem
