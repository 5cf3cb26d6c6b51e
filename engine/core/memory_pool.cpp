#include "engine/core/memory_pool.hpp"

#include "engine/core/error.hpp"

namespace tandem {

size_t MemoryPool::size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = 2u << 20, kSmallLimit = 1u << 20;
  if (bytes == 0) bytes = 1;
  const size_t unit = bytes < kSmallLimit ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}

void* MemoryPool::allocate(size_t bytes) {
  const size_t cls = size_class(bytes);
  void* p = nullptr;
  auto it = free_.find(cls);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    cached_ -= cls;
  } else {
    if (!raw_calls_) return nullptr;
    p = raw_allocate_(cls);
    if (!p && cached_ > 0) {  // the cache may hold what the driver lacks
      release_cached();
      p = raw_allocate_(cls);
    }
    if (!p) return nullptr;
    ++raw_count_;
  }
  live_.emplace(p, cls);
  in_use_ += cls;
  ++events_;
  return p;
}

void MemoryPool::deallocate(void* p) {
  if (!p) return;
  auto it = live_.find(p);
  TANDEM_CHECK(it != live_.end(), "the memory pool was asked to free ", p,
               ", which it never handed out or already took back (a double free in tandem)");
  const size_t cls = it->second;
  live_.erase(it);
  in_use_ -= cls;
  ++events_;
  free_[cls].push_back(p);
  cached_ += cls;
}

void MemoryPool::release_cached() {
  for (auto& [cls, blocks] : free_)
    for (void* p : blocks) raw_free_(p);
  free_.clear();
  cached_ = 0;
}

}  // namespace tandem
