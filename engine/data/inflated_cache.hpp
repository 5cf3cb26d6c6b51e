#pragma once
// Inflated copies of gzip-compressed data files, kept between runs. Debian ships
// Fashion-MNIST gzip-compressed, and inflating its 47 MB of training images cost
// about 0.4 CPU-seconds in every rank of every run (more than the rest of a short
// run's start). The first reader leaves the inflated bytes in a cache file; later
// readers map that file, so the ranks of a job share one copy in the page cache.
//
// Where: $TANDEM_CACHE_DIR, else $XDG_CACHE_HOME/tandem, else $HOME/.cache/tandem
// (TANDEM_CACHE_DIR=off turns the cache off). A cache file is named after the source
// file's path, size and modification time, so a changed source is inflated again; it
// is written under a temporary name and renamed, so a reader never sees half of one.
// Any failure to read or write the cache only costs the inflation.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tandem {

// Bytes that stay valid while `owner` lives (a mapping of a cache file, or a buffer).
struct SharedBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

// The cache's folder, or "" where it is off or no folder can be named.
std::string inflated_cache_dir();

// The cached inflated copy of gz_path, mapped read-only; an empty SharedBytes (owner
// null) where there is none.
SharedBytes cached_inflated(const std::string& gz_path);

// Leaves `bytes` (gz_path's whole inflated content) in the cache where it is 1 MiB or
// more; errors are ignored.
void cache_inflated(const std::string& gz_path, const uint8_t* bytes, size_t size);

}  // namespace tandem
