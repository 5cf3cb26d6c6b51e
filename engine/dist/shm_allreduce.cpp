#include "engine/dist/shm_allreduce.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <new>
#include <thread>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/dist/futex.hpp"

namespace tandem {

// Lock-free atomics are address-free, so they work between processes.
struct ShmAllreduce::Control {
  std::atomic<int> arrived;
  std::atomic<int> sense;
  std::atomic<double> opened_ms;  // when the last rank opened the barrier
  // Then, per rank, how many barriers it has entered: at a deadline, the ranks
  // behind the waiter are the missing ones.
  std::atomic<int64_t>* entered() { return reinterpret_cast<std::atomic<int64_t>*>(this + 1); }
};
static_assert(sizeof(ShmAllreduce::Control) % alignof(std::atomic<int64_t>) == 0, "the counters follow aligned");
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<double>::is_always_lock_free,
              "the shared barrier needs lock-free atomics");

namespace {

// How long a waiter spins before it sleeps on the futex: worth it only when every
// rank has a core of its own; with more ranks than cores a spinner takes the core
// from the rank everyone waits for.
double spin_us_for(int ranks) {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores != 0 && static_cast<unsigned>(ranks) <= cores ? 50.0 : 0.0;
}

}  // namespace

ShmAllreduce::ShmAllreduce(MPI_Comm node, int host_ranks) : node_(node) {
  MPI_Comm_rank(node_, &rank_);
  MPI_Comm_size(node_, &size_);
  spin_us_ = spin_us_for(host_ranks > 0 ? host_ranks : size_);
  void* mine = nullptr;
  const size_t control_bytes = sizeof(Control) + static_cast<size_t>(size_) * sizeof(std::atomic<int64_t>);
  const int rc = MPI_Win_allocate_shared(rank_ == 0 ? static_cast<MPI_Aint>(control_bytes) : 0, 1, MPI_INFO_NULL,
                                         node_, &mine, &control_window_);
  TANDEM_CHECK_HINT(rc == MPI_SUCCESS, "check /dev/shm is writable", "MPI_Win_allocate_shared for the barrier failed");
  MPI_Aint size = 0;
  int disp = 0;
  void* base = nullptr;
  MPI_Win_shared_query(control_window_, 0, &size, &disp, &base);
  control_ = static_cast<Control*>(base);
  if (rank_ == 0) {
    new (&control_->arrived) std::atomic<int>(0);
    new (&control_->sense) std::atomic<int>(0);
    new (&control_->opened_ms) std::atomic<double>(0.0);
    for (int r = 0; r < size_; ++r) new (&control_->entered()[r]) std::atomic<int64_t>(0);
  }
  MPI_Barrier(node_);  // set up once: a blocking barrier is fine here
}

ShmAllreduce::~ShmAllreduce() {
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  if (control_window_ != MPI_WIN_NULL) MPI_Win_free(&control_window_);
}

double ShmAllreduce::last_open_ms() const { return control_->opened_ms.load(std::memory_order_acquire); }

std::string ShmAllreduce::missing_ranks(const std::vector<int>& names) const {
  const int64_t mine = control_->entered()[rank_].load(std::memory_order_acquire);
  std::string missing;
  for (int r = 0; r < size_; ++r)
    if (control_->entered()[r].load(std::memory_order_acquire) < mine)
      missing += (missing.empty() ? "" : ", ") +
                 std::to_string(names.empty() ? r : names[static_cast<size_t>(r)]);
  return missing;
}

void ShmAllreduce::barrier(const Wait& wait) {
  sense_ = 1 - sense_;
  control_->entered()[rank_].fetch_add(1, std::memory_order_release);
  if (control_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    control_->arrived.store(0, std::memory_order_relaxed);
    control_->opened_ms.store(now_ms(), std::memory_order_relaxed);
    control_->sense.store(sense_, std::memory_order_release);  // the last one opens it
    futex_wake_all(control_->sense);
    return;
  }
  const int want = sense_;
  auto open = [this, want] { return control_->sense.load(std::memory_order_acquire) == want; };
  const double spin_until = now_ms() + spin_us_ / 1000.0;
  while (now_ms() < spin_until)
    if (open()) return;
  // Then sleep on the sense word: the last rank's wake-up ends the sleep at once;
  // the timeout only lets the caller's wait look at its deadline and MPI progress.
  wait([&] {
    if (open()) return true;
    futex_wait(control_->sense, 1 - want, 1000);
    return open();
  });
}

void ShmAllreduce::reserve(size_t count) {
  if (count <= capacity_) return;
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
  // One contiguous window, all of it owned by rank 0: size+3 slots of `count` (one
  // per rank, the sum's result, and two that broadcasts take in turn).
  const size_t slots = static_cast<size_t>(size_) + 3;
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

void ShmAllreduce::sum(float* data, size_t count, const Wait& wait, double* arrival_ms) {
  reserve(count);
  const size_t slot = capacity_;
  std::memcpy(base_ + static_cast<size_t>(rank_) * slot, data, count * sizeof(float));
  // The barrier's release/acquire pair orders the slot writes for the readers.
  const double start = now_ms();
  barrier(wait);  // every slot written
  if (arrival_ms) *arrival_ms = now_ms() - start;
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
  barrier(wait);  // every share summed
  std::memcpy(data, result, count * sizeof(float));
  // The next call overwrites the slots and the result only after its first
  // barrier, which no rank passes before every rank has copied this result out.
}

void ShmAllreduce::broadcast(void* data, size_t bytes, const Wait& wait) {
  TANDEM_CHECK(bytes <= capacity_bytes(), "a shared-memory broadcast of ", bytes, " bytes in a window of ",
               capacity_bytes(), " (a bug in tandem: reserve() first, at a point every rank reaches)");
  // Broadcasts alternate between two slots of their own, so one barrier is enough:
  // rank 0 writes a slot again only two broadcasts later, after the barrier of the
  // one in between, which every rank enters only once it has read this one. (sum()
  // never touches these slots.) One barrier fewer matters where ranks outnumber
  // cores: every barrier waits for the last rank to get a core.
  float* slot = base_ + (static_cast<size_t>(size_) + 1 + static_cast<size_t>(broadcasts_ % 2)) * capacity_;
  ++broadcasts_;
  if (rank_ == 0) std::memcpy(slot, data, bytes);
  barrier(wait);  // written
  if (rank_ != 0) std::memcpy(data, slot, bytes);
}

}  // namespace tandem
