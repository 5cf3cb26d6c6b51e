#include "engine/dist/shm_channel.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/dist/futex.hpp"

namespace tandem {

namespace {
constexpr int kEmpty = 0, kFull = 1;
constexpr size_t kAlign = 64;  // a cache line: slots do not share one
constexpr long kNapUs = 1000;  // a waiter wakes at least this often to look at its deadline

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Doorbell {
  std::atomic<int> rings;  // every message to rank 0 adds one
};
}  // namespace

struct ShmChannel::Slot {
  std::atomic<int> state;  // kEmpty or kFull: the futex both sides sleep on
  int from, to;
  size_t bytes;
  char* payload() { return reinterpret_cast<char*>(this) + round_up(sizeof(Slot)); }
};
static_assert(std::atomic<int>::is_always_lock_free, "the channel's state words are shared between processes");

ShmChannel::ShmChannel(Comm& world, MPI_Comm node, const std::vector<int>& tags, size_t max_bytes)
    : world_(world), tags_(tags), max_bytes_(max_bytes) {
  MPI_Comm_rank(node, &rank_);
  MPI_Comm_size(node, &size_);
  slot_bytes_ = round_up(sizeof(Slot)) + round_up(max_bytes);
  const size_t bytes = round_up(sizeof(Doorbell)) + tags_.size() * static_cast<size_t>(size_) * slot_bytes_;
  void* mine = nullptr;
  const int rc = MPI_Win_allocate_shared(rank_ == 0 ? static_cast<MPI_Aint>(bytes) : 0, 1, MPI_INFO_NULL, node,
                                         &mine, &window_);
  // Every rank gets the same answer from the collective, so all fall back together.
  TANDEM_CHECK_HINT(rc == MPI_SUCCESS, "check /dev/shm has room", "MPI_Win_allocate_shared of ", bytes,
                    " bytes for the parameter server's channel failed");
  MPI_Aint size = 0;
  int disp = 0;
  void* base = nullptr;
  MPI_Win_shared_query(window_, 0, &size, &disp, &base);
  base_ = static_cast<char*>(base);
  if (rank_ == 0) {
    new (&reinterpret_cast<Doorbell*>(base_)->rings) std::atomic<int>(0);
    for (size_t t = 0; t < tags_.size(); ++t)
      for (int r = 0; r < size_; ++r) {
        Slot* s = slot(tags_[t], r, "setting up");
        new (&s->state) std::atomic<int>(kEmpty);
        s->from = s->to = -1;
        s->bytes = 0;
      }
  }
  MPI_Barrier(node);  // set up once, before any message: a blocking barrier is fine here
}

ShmChannel::~ShmChannel() {
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
}

ShmChannel::Slot* ShmChannel::slot(int tag, int peer, const char* what) {
  const auto t = std::find(tags_.begin(), tags_.end(), tag);
  TANDEM_CHECK(t != tags_.end(), what, ": tag ", tag, " was not opened on this channel (a bug in tandem)");
  TANDEM_CHECK(peer >= 0 && peer < size_, what, ": rank ", peer, " is not one of the ", size_, " ranks");
  const size_t index = static_cast<size_t>(t - tags_.begin()) * static_cast<size_t>(size_) + static_cast<size_t>(peer);
  return reinterpret_cast<Slot*>(base_ + round_up(sizeof(Doorbell)) + index * slot_bytes_);
}

void ShmChannel::fail_deadline(const char* what, const std::string& who, int named) {
  world_.abort(fmt::format("{}: {} within {:.0f} s (collective_timeout_s); {}", what, who, world_.timeout_s(),
                           world_.missing_text(named >= 0 ? std::to_string(named) : "", "stuck, dead or far slower")));
  std::abort();  // not reached: Comm::abort never returns, which GCC cannot see through the virtual call
}

void ShmChannel::send(int to, int tag, const void* data, size_t bytes, const char* what) {
  TANDEM_CHECK(rank_ == 0 || to == 0, what, ": rank ", rank_, " sends to rank ", to,
               ", but this channel only joins rank 0 to each rank (a bug in tandem)");
  TANDEM_CHECK(bytes <= max_bytes_, what, ": a message of ", bytes, " bytes on a channel opened for ", max_bytes_);
  Slot* s = slot(tag, rank_ == 0 ? to : rank_, what);
  // One message in flight per slot: wait until the last one has been taken.
  const double deadline = now_ms() + world_.timeout_s() * 1000.0;
  while (s->state.load(std::memory_order_acquire) != kEmpty) {
    if (now_ms() > deadline) fail_deadline(what, fmt::format("rank {} did not take the last message", to), to);
    futex_wait(s->state, kFull, kNapUs);
  }
  std::memcpy(s->payload(), data, bytes);
  s->from = rank_;
  s->to = to;
  s->bytes = bytes;
  s->state.store(kFull, std::memory_order_release);  // publishes the payload
  futex_wake_all(s->state);
  if (to == 0) {
    auto& bell = reinterpret_cast<Doorbell*>(base_)->rings;
    bell.fetch_add(1, std::memory_order_release);
    futex_wake_all(bell);
  }
}

int ShmChannel::receive(int from, int tag, void* data, size_t bytes, const char* what) {
  TANDEM_CHECK(rank_ == 0 || from == 0, what, ": rank ", rank_, " waits for rank ", from,
               ", but this channel only joins rank 0 to each rank (a bug in tandem)");
  auto& bell = reinterpret_cast<Doorbell*>(base_)->rings;
  // A full slot addressed to this rank: from `from`, or from any rank, taken in
  // turn from where the last receive left off so no sender starves.
  auto find = [&]() -> Slot* {
    if (from != kAnySource) {
      Slot* s = slot(tag, rank_ == 0 ? from : rank_, what);
      return s->state.load(std::memory_order_acquire) == kFull && s->to == rank_ ? s : nullptr;
    }
    for (int i = 0; i < size_; ++i) {
      const int peer = (next_ + i) % size_;
      Slot* s = slot(tag, rank_ == 0 ? peer : rank_, what);
      if (s->state.load(std::memory_order_acquire) == kFull && s->to == rank_) {
        next_ = (peer + 1) % size_;
        return s;
      }
      if (rank_ != 0) break;  // another rank has one slot per tag
    }
    return nullptr;
  };
  const double deadline = now_ms() + world_.timeout_s() * 1000.0;
  Slot* s = nullptr;
  for (;;) {
    // Rank 0 sleeps on the doorbell (every message to it rings it), read before
    // looking so a ring in between ends the sleep at once; another rank on its slot.
    const int rung = bell.load(std::memory_order_acquire);
    if ((s = find())) break;
    if (now_ms() > deadline)
      fail_deadline(what,
                    from == kAnySource ? std::string("nothing came from any rank")
                                       : fmt::format("nothing came from rank {}", from),
                    from == kAnySource ? -1 : from);
    if (rank_ == 0)
      futex_wait(bell, rung, kNapUs);
    else
      futex_wait(slot(tag, rank_, what)->state, kEmpty, kNapUs);
  }
  TANDEM_CHECK(s->bytes == bytes, what, ": a message of ", s->bytes, " bytes where ", bytes,
               " were expected (ranks running different tandem builds or experiments?)");
  std::memcpy(data, s->payload(), bytes);
  const int sender = s->from;
  s->state.store(kEmpty, std::memory_order_release);
  futex_wake_all(s->state);  // a sender may wait for the slot
  return sender;
}

}  // namespace tandem
