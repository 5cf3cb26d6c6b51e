#pragma once
// Futex waits and wake-ups on a word in memory shared between the ranks of one host
// (an MPI-3 shared window). Shared, not process-private, calls: every rank maps the
// same page, so the kernel matches waiter and waker by physical address. A waiter
// costs no CPU at all, which matters where ranks outnumber cores.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <ctime>

namespace tandem {

static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free,
              "a futex word is a lock-free atomic int");

// Sleeps while `word` holds while_value, for at most timeout_us (a wake-up, a
// changed value or a signal end it sooner; callers re-check their condition).
inline void futex_wait(std::atomic<int>& word, int while_value, long timeout_us) {
  timespec ts{static_cast<time_t>(timeout_us / 1000000), (timeout_us % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAIT, while_value, &ts, nullptr, 0);
}

inline void futex_wake_all(std::atomic<int>& word) {
  syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace tandem
