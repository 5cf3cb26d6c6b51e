#pragma once
// A caching allocator for device memory: freed blocks go to a free list by size
// class and are handed out again, so a training step allocates nothing from the
// driver once warmed up (cudaMalloc and cudaFree synchronise the whole device).
// Sizes are rounded up to a class (multiples of 512 bytes below 1 MiB, then of
// 2 MiB) so buffers that grow a little under a changing local batch still reuse
// blocks. When the driver says no, the pool returns every cached block and tries
// once more before failing. The raw allocator is a pair of functions, so the pool's
// bookkeeping is tested on the host.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

namespace tandem {

class MemoryPool {
public:
  using RawAllocate = std::function<void*(size_t bytes)>;  // nullptr when out of memory
  using RawFree = std::function<void(void* p)>;
  MemoryPool(RawAllocate allocate, RawFree free) : raw_allocate_(std::move(allocate)), raw_free_(std::move(free)) {}
  ~MemoryPool() { release_cached(); }
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  static size_t size_class(size_t bytes);
  // nullptr when even an emptied cache leaves the driver without the memory, or when
  // the cache lacks the block and raw calls are off.
  void* allocate(size_t bytes);
  // Whether a cache miss may call the driver (off while a CUDA graph is captured:
  // cudaMalloc and cudaFree are illegal then).
  void set_raw_calls(bool on) { raw_calls_ = on; }
  void deallocate(void* p);
  // Hands every cached (free) block back to the driver.
  void release_cached();

  size_t bytes_in_use() const { return in_use_; }     // held by live allocations (their classes)
  size_t bytes_cached() const { return cached_; }     // free blocks kept for reuse
  size_t raw_allocations() const { return raw_count_; }  // calls that reached the driver
  // Allocations and frees so far: a pointer captured in a graph is still the same
  // block's while this has not moved (Device::memory_epoch).
  uint64_t events() const { return events_; }

private:
  RawAllocate raw_allocate_;
  RawFree raw_free_;
  std::map<size_t, std::vector<void*>> free_;     // size class -> free blocks
  std::unordered_map<void*, size_t> live_;        // block -> its size class
  size_t in_use_ = 0, cached_ = 0, raw_count_ = 0;
  uint64_t events_ = 0;
  bool raw_calls_ = true;
};

}  // namespace tandem
